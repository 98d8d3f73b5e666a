package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/NVIDIA/topograph/pkg/ib"
	"github.com/NVIDIA/topograph/pkg/topology"
)

// readNodeNames reads the cluster's node names (one a line): what Topograph's engine hands its provider.
func readNodeNames(path string) ([]topology.ComputeInstances, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	instances := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if name := strings.TrimSpace(line); name != "" {
			instances[name] = name
		}
	}
	return []topology.ComputeInstances{{Region: "local", Instances: instances}}, nil
}

// ibGraph is the graph Topograph's infiniband providers return for one ibnetdiscover output: the package's
// parse and tree (with its merge of equivalent switches), the roots then merged under one tree root.
func ibGraph(data []byte, cis []topology.ComputeInstances) (*topology.Graph, int, error) {
	roots, hcas, err := ib.GenerateTopologyConfig(data, cis)
	if err != nil {
		return nil, 0, err
	}
	root := &topology.Vertex{Vertices: map[string]*topology.Vertex{}}
	for _, v := range topology.NewMerger(roots).TopTier() {
		root.Vertices[v.ID] = v
	}
	return &topology.Graph{Tiers: root}, len(hcas), nil
}

func runIB(args []string) (map[string]any, error) {
	flags := flag.NewFlagSet("ib", flag.ContinueOnError)
	input := flags.String("ibnetdiscover", "", "saved ibnetdiscover output")
	nodesPath := flags.String("nodes", "", "node names, one a line")
	labelsPath := flags.String("labels", "", "write node -> labels JSON here")
	slurmPath := flags.String("slurm", "", "write topology.conf here")
	if err := flags.Parse(args); err != nil {
		return nil, err
	}
	if *input == "" || *nodesPath == "" {
		return nil, fmt.Errorf("give -ibnetdiscover FILE and -nodes FILE")
	}
	start := time.Now()
	cis, err := readNodeNames(*nodesPath)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(*input)
	if err != nil {
		return nil, err
	}
	read := time.Now()
	graph, hcas, err := ibGraph(data, cis)
	if err != nil {
		return nil, err
	}
	built := time.Now()
	out, err := render(context.Background(), graph)
	if err != nil {
		return nil, err
	}
	report := map[string]any{"read s": read.Sub(start).Seconds(), "graph s": built.Sub(read).Seconds(),
		"nodes": len(cis[0].Instances), "hcas": hcas}
	return report, out.save(*labelsPath, *slurmPath, report)
}
