module topolabel.dev/hack/exporters

// The modules whose CRDs the NFD and Slinky exports are checked against (tests/test_nfd_export.py,
// tests/test_slinky_export.py): hack/build-test-stack exporters links their directories in the module cache.
// Nothing is built from them.

go 1.26.0

require (
	github.com/SlinkyProject/slurm-operator v1.0.0
	sigs.k8s.io/node-feature-discovery v0.18.3
)
