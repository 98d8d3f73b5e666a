package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/NVIDIA/topograph/pkg/providers"
	"github.com/NVIDIA/topograph/pkg/providers/aws"
	"github.com/NVIDIA/topograph/pkg/topology"
)

// readInstances reads {"region": {"instance id": "node name"}}: what Topograph's engine hands the provider.
func readInstances(path string) ([]topology.ComputeInstances, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	regions := map[string]map[string]string{}
	if err := json.Unmarshal(data, &regions); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	cis, count := make([]topology.ComputeInstances, 0, len(regions)), 0
	for region, instances := range regions {
		cis = append(cis, topology.ComputeInstances{Region: region, Instances: instances})
		count += len(instances)
	}
	return cis, count, nil
}

// runAWS loads Topograph's aws provider as its server does (credentials from AWS_ACCESS_KEY_ID/
// AWS_SECRET_ACCESS_KEY; the SDK takes the endpoint from AWS_ENDPOINT_URL_EC2) and asks it for the graph.
func runAWS(args []string) (map[string]any, error) {
	flags := flag.NewFlagSet("aws", flag.ContinueOnError)
	input := flags.String("instances", "", `{"region": {"instance id": "node name"}} JSON`)
	labelsPath := flags.String("labels", "", "write node -> labels JSON here")
	slurmPath := flags.String("slurm", "", "write topology.conf here")
	if err := flags.Parse(args); err != nil {
		return nil, err
	}
	if *input == "" {
		return nil, fmt.Errorf("give -instances FILE")
	}
	ctx := context.Background()
	start := time.Now()
	cis, count, err := readInstances(*input)
	if err != nil {
		return nil, err
	}
	provider, httpErr := aws.Loader(ctx, providers.Config{})
	if httpErr != nil {
		return nil, fmt.Errorf("aws provider: %s", httpErr.Error())
	}
	loaded := time.Now()
	graph, httpErr := provider.GenerateTopologyConfig(ctx, nil, cis)
	if httpErr != nil {
		return nil, fmt.Errorf("aws topology: %s", httpErr.Error())
	}
	asked := time.Now()
	out, err := render(ctx, graph)
	if err != nil {
		return nil, err
	}
	report := map[string]any{"load s": loaded.Sub(start).Seconds(), "graph s": asked.Sub(loaded).Seconds(),
		"nodes": count}
	return report, out.save(*labelsPath, *slurmPath, report)
}
