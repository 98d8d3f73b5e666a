//go:build topograph_v1

package main

import (
	"context"

	"github.com/NVIDIA/topograph/pkg/engines/k8s"
	"github.com/NVIDIA/topograph/pkg/topology"
)

// nodeLabels runs Topograph v1.0.0's Kubernetes labeler with its default keys (fabric.topograph.run/tier-0
// for the switch closest to the node, tier-1 above it, tier-2 above that).
func nodeLabels(ctx context.Context, graph *topology.Graph, sink labelSink) error {
	return k8s.NewTopologyLabeler(k8s.NewTopologyLabelKeys(nil, "")).ApplyNodeLabels(ctx, graph, sink)
}
