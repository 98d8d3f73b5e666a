//go:build !topograph_v1

package main

import (
	"context"

	"github.com/NVIDIA/topograph/pkg/engines/k8s"
	"github.com/NVIDIA/topograph/pkg/topology"
)

// nodeLabels runs Topograph v0.5.0's Kubernetes labeler with its default keys
// (network.topology.nvidia.com/leaf, spine, core).
func nodeLabels(ctx context.Context, graph *topology.Graph, sink labelSink) error {
	k8s.InitLabels(k8s.DefaultLabelAccelerator, k8s.DefaultLabelLeaf, k8s.DefaultLabelSpine, k8s.DefaultLabelCore)
	return k8s.NewTopologyLabeler().ApplyNodeLabels(ctx, graph, sink)
}
