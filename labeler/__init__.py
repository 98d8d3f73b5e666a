"""topolabel core: topology model, label planning and writing, CLI, operator."""
