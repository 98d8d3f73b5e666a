// Command topograph-harness runs NVIDIA Topograph's own packages on benchmark inputs, for bench/topograph.py.
//
//	topograph-harness ib  -ibnetdiscover FILE -nodes FILE [-labels OUT] [-slurm OUT]
//	topograph-harness aws -instances FILE [-labels OUT] [-slurm OUT]
//
// Each mode builds the topology.Graph the matching Topograph provider returns, then both of Topograph's
// outputs from it: the Slurm engine's topology.conf (topology/tree) and the Kubernetes engine's node labels
// (its topology labeler with its default keys, collected here instead of patched onto nodes). The labeler's
// API changed in v1.0.0: labels_v0.go calls v0.5.0's, labels_v1.go (build tag topograph_v1) v1.0.0's.
// It prints one JSON object on stdout: phase timings in seconds and counts; exit 2 with one line on stderr
// on an error.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/NVIDIA/topograph/pkg/engines/slurm"
	"github.com/NVIDIA/topograph/pkg/topology"
)

// labelSink implements k8s.Labeler: it keeps the labels Topograph would patch onto each node.
type labelSink map[string]map[string]string

func (s labelSink) AddNodeLabels(_ context.Context, node string, labels map[string]string) error {
	s[node] = labels
	return nil
}

// outputs are the two things Topograph makes from a graph, with their timings.
type outputs struct {
	slurmConf    []byte
	labels       labelSink
	slurmSeconds float64
	labelSeconds float64
}

func render(ctx context.Context, graph *topology.Graph) (*outputs, error) {
	start := time.Now()
	conf, httpErr := slurm.GenerateOutput(ctx, graph, map[string]any{"plugin": topology.TopologyTree})
	if httpErr != nil {
		return nil, fmt.Errorf("slurm output: %s", httpErr.Error())
	}
	mid := time.Now()
	labels := labelSink{}
	if err := nodeLabels(ctx, graph, labels); err != nil {
		return nil, fmt.Errorf("node labels: %w", err)
	}
	return &outputs{conf, labels, mid.Sub(start).Seconds(), time.Since(mid).Seconds()}, nil
}

// save writes the outputs where asked and adds their sizes and timings to the report.
func (o *outputs) save(labelsPath, slurmPath string, report map[string]any) error {
	if slurmPath != "" {
		if err := os.WriteFile(slurmPath, o.slurmConf, 0o644); err != nil {
			return err
		}
	}
	if labelsPath != "" {
		data, err := json.Marshal(o.labels)
		if err != nil {
			return err
		}
		if err := os.WriteFile(labelsPath, data, 0o644); err != nil {
			return err
		}
	}
	report["slurm s"], report["labels s"] = o.slurmSeconds, o.labelSeconds
	report["labelled"], report["topology.conf bytes"] = len(o.labels), len(o.slurmConf)
	return nil
}

func main() {
	modes := map[string]func([]string) (map[string]any, error){"ib": runIB, "aws": runAWS}
	if len(os.Args) < 2 || modes[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "topograph-harness: give a mode: ib or aws")
		os.Exit(2)
	}
	report, err := modes[os.Args[1]](os.Args[2:])
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(report)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "topograph-harness %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
}
