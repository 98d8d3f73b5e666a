// tas-oracle runs Kueue v0.19.2's own flavor assignment and Topology-Aware Scheduling code (the scheduler
// cache, its TAS snapshot and the flavor assigner, all imported from the sigs.k8s.io/kueue module) on a
// scenario read as JSON from stdin, and prints what Kueue decides, as JSON, on stdout.
//
// It is the judge `topolabel fit` is compared with in tests/test_tas_oracle.py while no Kueue manager runs
// in the tests: the same code Kueue's scheduler calls, at Kueue's default feature gates, without the API
// server, the job controllers and the webhooks (those are judged on the real stack).
//
// Input:  {"topologies": [Topology], "flavors": [ResourceFlavor], "clusterQueue": ClusterQueue,
//          "nodes": [Node], "pods": [Pod], "workloads": [{"name": s, "podSets": [{"name", "count", "template"}]}],
//          "maxCycles": n}
// Output: {"workloads": [{"admitted": b, "cycles": n, "messages": [s], "podSets": [{"name", "flavors",
//          "levels", "domains": [{"values", "count"}]}]}]}
// Workloads are scheduled one after another; an admitted one holds its capacity for the next (as the
// Workloads of a LeaderWorkerSet's replicas do). A Workload is tried for up to maxCycles scheduling cycles,
// each resuming the flavor search where the one before stopped, as Kueue's scheduler does, until no flavor
// is left to try (Kueue then parks it until the cluster changes; the last message is the one it keeps).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"
)

type podSetIn struct {
	Name     string                 `json:"name"`
	Count    int32                  `json:"count"`
	Template corev1.PodTemplateSpec `json:"template"`
}

type workloadIn struct {
	Name    string     `json:"name"`
	PodSets []podSetIn `json:"podSets"`
}

type scenario struct {
	Topologies   []kueue.Topology       `json:"topologies"`
	Flavors      []kueue.ResourceFlavor `json:"flavors"`
	ClusterQueue kueue.ClusterQueue     `json:"clusterQueue"`
	Nodes        []corev1.Node          `json:"nodes"`
	Pods         []corev1.Pod           `json:"pods"`
	Workloads    []workloadIn           `json:"workloads"`
	MaxCycles    int                    `json:"maxCycles"`
}

type domainOut struct {
	Values []string `json:"values"`
	Count  int32    `json:"count"`
}

type podSetOut struct {
	Name    string            `json:"name"`
	Flavors map[string]string `json:"flavors"`
	Levels  []string          `json:"levels"`
	Domains []domainOut       `json:"domains"`
}

type workloadOut struct {
	Admitted bool        `json:"admitted"`
	Cycles   int         `json:"cycles"`
	Messages []string    `json:"messages"`
	PodSets  []podSetOut `json:"podSets"`
	Error    string      `json:"error,omitempty"`
}

// limitsAsRequests fills a container's missing requests from its limits, as Kueue does for a Workload's
// pod templates (workload.AdjustResources) before it counts them.
func limitsAsRequests(spec *corev1.PodSpec) {
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			for name, quantity := range c.Resources.Limits {
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				if _, found := c.Resources.Requests[name]; !found {
					c.Resources.Requests[name] = quantity
				}
			}
		}
	}
}

// buildWorkload makes the Workload a job controller would create: one PodSet per template, its topology
// request built by Kueue's own annotation parser.
func buildWorkload(in workloadIn, index int) (*kueue.Workload, error) {
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%d", index))},
		Spec:       kueue.WorkloadSpec{QueueName: "lq"},
	}
	for _, ps := range in.PodSets {
		template := *ps.Template.DeepCopy()
		limitsAsRequests(&template.Spec)
		request, err := jobframework.NewPodSetTopologyRequest(&template.ObjectMeta).
			PodIndexLabel(new("batch.kubernetes.io/job-completion-index")).Build()
		if err != nil {
			return nil, fmt.Errorf("PodSet %s: %w", ps.Name, err)
		}
		wl.Spec.PodSets = append(wl.Spec.PodSets, kueue.PodSet{
			Name: kueue.NewPodSetReference(ps.Name), Count: ps.Count, Template: template, TopologyRequest: request,
		})
	}
	return wl, nil
}

func podSetsOut(a flavorassigner.Assignment) []podSetOut {
	out := make([]podSetOut, 0, len(a.PodSets))
	for _, ps := range a.PodSets {
		o := podSetOut{Name: string(ps.Name), Flavors: map[string]string{}, Levels: []string{}, Domains: []domainOut{}}
		for res, fa := range ps.Flavors {
			o.Flavors[string(res)] = string(fa.Name)
		}
		if ps.TopologyAssignment != nil {
			o.Levels = ps.TopologyAssignment.Levels
			for _, d := range ps.TopologyAssignment.Domains {
				o.Domains = append(o.Domains, domainOut{Values: d.Values, Count: d.Count})
			}
		}
		out = append(out, o)
	}
	return out
}

func run(ctx context.Context, log logr.Logger, sc scenario) ([]workloadOut, error) {
	client := utiltesting.NewClientBuilder().Build()
	cache := schdcache.New(client)
	flavors := map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor{}
	for i := range sc.Flavors {
		cache.AddOrUpdateResourceFlavor(log, &sc.Flavors[i])
		flavors[kueue.ResourceFlavorReference(sc.Flavors[i].Name)] = &sc.Flavors[i]
	}
	for i := range sc.Topologies {
		cache.AddOrUpdateTopology(log, &sc.Topologies[i])
	}
	if err := cache.AddClusterQueue(ctx, &sc.ClusterQueue); err != nil {
		return nil, fmt.Errorf("ClusterQueue: %w", err)
	}
	for i := range sc.Nodes {
		cache.TASCache().SyncNode(&sc.Nodes[i])
	}
	for i := range sc.Pods {
		pod := &sc.Pods[i]
		if pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			cache.TASCache().Update(pod, log)
		}
	}
	cycles := sc.MaxCycles
	if cycles <= 0 {
		cycles = 20
	}
	var results []workloadOut
	for index, in := range sc.Workloads {
		wl, err := buildWorkload(in, index)
		if err != nil {
			results = append(results, workloadOut{Error: err.Error()})
			break
		}
		info := workload.NewInfo(wl)
		info.ClusterQueue = kueue.ClusterQueueReference(sc.ClusterQueue.Name)
		result := workloadOut{Messages: []string{}}
		seen := map[string]bool{}
		for cycle := 0; cycle < cycles; cycle++ {
			snapshot, err := cache.Snapshot(ctx)
			if err != nil {
				return nil, err
			}
			cq := snapshot.ClusterQueue(info.ClusterQueue)
			assigner := flavorassigner.New(info, cq, flavors, false, nil, nil, configapi.QuotaCheckBlockUndeclared,
				resources.NewResourceFormatter(), int64(cycle))
			assignment := assigner.Assign(ctx, nil)
			result.Cycles = cycle + 1
			if assignment.RepresentativeMode() == flavorassigner.Fit {
				result.Admitted = true
				result.PodSets = podSetsOut(assignment)
				admission := &kueue.Admission{ClusterQueue: info.ClusterQueue, PodSetAssignments: assignment.ToAPI(log)}
				workload.SetQuotaReservation(wl, admission, clock.RealClock{})
				cache.AddOrUpdateWorkload(log, wl)
				break
			}
			result.Messages = append(result.Messages, assignment.Message())
			// With no flavor left to try, Kueue parks the Workload until the cluster changes; its message
			// stays this cycle's.
			if !assignment.LastState.PendingFlavors() {
				break
			}
			state, _ := json.Marshal(assignment.LastState.LastTriedFlavorIdx)
			if seen[string(state)] {
				break
			}
			seen[string(state)] = true
			info.LastAssignment = &assignment.LastState
		}
		results = append(results, result)
		if !result.Admitted {
			break
		}
	}
	return results, nil
}

func main() {
	var sc scenario
	if err := json.NewDecoder(os.Stdin).Decode(&sc); err != nil {
		fmt.Fprintf(os.Stderr, "tas-oracle: reading the scenario: %v\n", err)
		os.Exit(2)
	}
	log := logr.Discard()
	ctx := ctrl.IntoContext(context.Background(), log)
	results, err := run(ctx, log, sc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tas-oracle: %v\n", err)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"workloads": results}); err != nil {
		fmt.Fprintf(os.Stderr, "tas-oracle: %v\n", err)
		os.Exit(2)
	}
}
