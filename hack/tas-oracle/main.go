// tas-oracle runs Kueue v0.19.2's own admission code (the scheduler cache with its quota tree and TAS
// snapshot, the flavor assigner, the classical preemptor, workload.ValidateAdmissibility, all imported from
// the sigs.k8s.io/kueue module) on a scenario read as JSON from stdin, and prints what Kueue decides, as
// JSON, on stdout.
//
// It is the judge `topolabel fit` is compared with in tests/test_tas_oracle.py and tests/test_admission_oracle.py:
// the code Kueue's scheduler calls, at Kueue's default feature gates, stepped as the scheduler
// steps it (nominate, getInitialAssignments, updateAssignmentForTAS, processEntry), without the API server,
// the job controllers and the webhooks (those are judged on the real stack).
//
// Input, one scenario or a JSON array of them:
//
//	{"topologies": [Topology], "flavors": [ResourceFlavor], "clusterQueue": ClusterQueue,
//	 "clusterQueues": [ClusterQueue], "cohorts": [Cohort], "localQueues": [LocalQueue],
//	 "namespaces": [Namespace], "nodes": [Node], "pods": [Pod],
//	 "background": [workload], "workloads": [workload], "maxCycles": n}
//	workload: {"name", "namespace", "queueName", "priority", "podSets": [{"name", "count", "template"}]}
//
// Output, one result or an array of them:
//
//	{"background": [{"name", "admitted", "object": Workload}],
//	 "workloads": [{"admitted": b, "outcome": "admitted"|"preempt"|"pending", "cycles": n, "messages": [s],
//	                "targets": [namespace/name], "podSets": [{"name", "flavors", "levels",
//	                "domains": [{"values", "count"}]}]}]}
//
// Background workloads are submitted first, one after another; each one Kueue admits holds its quota and
// capacity (as an admitted Workload with its admission), the others are dropped. Then the job's Workloads
// are scheduled one after another; an admitted one holds its capacity for the next (as the Workloads of a
// LeaderWorkerSet's replicas do). A Workload is tried for up to maxCycles scheduling cycles, each resuming
// the flavor search where the one before stopped, until it is admitted, Kueue would preempt for it, or no
// flavor is left to try (Kueue then parks it until the cluster changes; the last message is the one it keeps).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	utiltas "sigs.k8s.io/kueue/pkg/util/tas"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"
)

type podSetIn struct {
	Name     string                 `json:"name"`
	Count    int32                  `json:"count"`
	Template corev1.PodTemplateSpec `json:"template"`
}

type workloadIn struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	QueueName string     `json:"queueName"`
	Priority  *int32     `json:"priority"`
	PodSets   []podSetIn `json:"podSets"`
}

type scenario struct {
	Topologies    []kueue.Topology       `json:"topologies"`
	Flavors       []kueue.ResourceFlavor `json:"flavors"`
	ClusterQueue  *kueue.ClusterQueue    `json:"clusterQueue"`
	ClusterQueues []kueue.ClusterQueue   `json:"clusterQueues"`
	Cohorts       []kueue.Cohort         `json:"cohorts"`
	LocalQueues   []kueue.LocalQueue     `json:"localQueues"`
	Namespaces    []corev1.Namespace     `json:"namespaces"`
	Nodes         []corev1.Node          `json:"nodes"`
	Pods          []corev1.Pod           `json:"pods"`
	Background    []workloadIn           `json:"background"`
	Workloads     []workloadIn           `json:"workloads"`
	MaxCycles     int                    `json:"maxCycles"`
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
	Outcome  string      `json:"outcome"`
	Cycles   int         `json:"cycles"`
	Messages []string    `json:"messages"`
	Targets  []string    `json:"targets"`
	PodSets  []podSetOut `json:"podSets"`
	Error    string      `json:"error,omitempty"`
}

type backgroundOut struct {
	Name     string          `json:"name"`
	Admitted bool            `json:"admitted"`
	Object   *kueue.Workload `json:"object,omitempty"`
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
func buildWorkload(in workloadIn, uid string, created time.Time) (*kueue.Workload, error) {
	namespace, queue := in.Namespace, in.QueueName
	if namespace == "" {
		namespace = "default"
	}
	if queue == "" {
		queue = "lq"
	}
	wl := &kueue.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: namespace, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(created)},
		Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(queue), Priority: in.Priority},
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

// oracle holds Kueue's cache and what the scheduler reads besides it.
type oracle struct {
	cache     *schdcache.Cache
	client    client.Client
	flavors   map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor
	queues    map[string]*kueue.LocalQueue
	preemptor *preemption.Preemptor
	clock     *clocktesting.FakeClock
	cycles    int
	cycle     int64
}

func newOracle(ctx context.Context, log logr.Logger, sc scenario) (*oracle, error) {
	var objects []client.Object
	for i := range sc.Namespaces {
		objects = append(objects, &sc.Namespaces[i])
	}
	if len(sc.Namespaces) == 0 { // scenarios without namespaces: the ones their workloads name, unlabelled
		seen := map[string]bool{}
		for _, in := range append(append([]workloadIn{}, sc.Background...), sc.Workloads...) {
			ns := in.Namespace
			if ns == "" {
				ns = "default"
			}
			if !seen[ns] {
				seen[ns] = true
				objects = append(objects, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
		}
	}
	cl := utiltesting.NewClientBuilder().WithObjects(objects...).Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := &oracle{cache: schdcache.New(cl), client: cl, flavors: map[kueue.ResourceFlavorReference]*kueue.ResourceFlavor{},
		queues: map[string]*kueue.LocalQueue{}, clock: clock, cycles: sc.MaxCycles,
		preemptor: preemption.New(cl, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp},
			nil, nil, false, clock, nil, nil, nil)}
	if o.cycles <= 0 {
		o.cycles = 20
	}
	for i := range sc.Flavors {
		o.cache.AddOrUpdateResourceFlavor(log, &sc.Flavors[i])
		o.flavors[kueue.ResourceFlavorReference(sc.Flavors[i].Name)] = &sc.Flavors[i]
	}
	for i := range sc.Topologies {
		o.cache.AddOrUpdateTopology(log, &sc.Topologies[i])
	}
	for i := range sc.Cohorts {
		if err := o.cache.AddOrUpdateCohort(&sc.Cohorts[i]); err != nil {
			return nil, fmt.Errorf("Cohort %s: %w", sc.Cohorts[i].Name, err)
		}
	}
	cqs := sc.ClusterQueues
	if sc.ClusterQueue != nil {
		cqs = append(cqs, *sc.ClusterQueue)
	}
	for i := range cqs {
		if err := o.cache.AddClusterQueue(ctx, &cqs[i]); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", cqs[i].Name, err)
		}
	}
	if len(sc.LocalQueues) == 0 && len(cqs) == 1 { // the single-queue form: LocalQueue "lq" everywhere
		o.queues["*/lq"] = &kueue.LocalQueue{Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cqs[0].Name)}}
	}
	for i := range sc.LocalQueues {
		lq := &sc.LocalQueues[i]
		o.queues[lq.Namespace+"/"+lq.Name] = lq
	}
	for i := range sc.Nodes {
		o.cache.TASCache().SyncNode(&sc.Nodes[i])
	}
	for i := range sc.Pods {
		pod := &sc.Pods[i]
		// Kueue's non-TAS usage controller: bound, unfinished pods that TAS did not place
		if pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed &&
			!utiltas.IsTAS(pod) {
			o.cache.TASCache().Update(pod, log)
		}
	}
	return o, nil
}

// blocker is what the workload controller and the scheduler's nominate say before any flavor is tried.
func (o *oracle) blocker(ctx context.Context, info *workload.Info, snapshot *schdcache.Snapshot) string {
	wl := info.Obj
	lq := o.queues[wl.Namespace+"/"+string(wl.Spec.QueueName)]
	if lq == nil {
		lq = o.queues["*/"+string(wl.Spec.QueueName)]
	}
	switch {
	case lq == nil:
		return fmt.Sprintf("LocalQueue %s doesn't exist", wl.Spec.QueueName)
	case lq.Spec.StopPolicy != nil && *lq.Spec.StopPolicy != kueue.None:
		return fmt.Sprintf("LocalQueue %s is inactive", wl.Spec.QueueName)
	}
	info.ClusterQueue = lq.Spec.ClusterQueue
	if snapshot.InactiveClusterQueueSets.Has(info.ClusterQueue) || !o.cache.ClusterQueueActive(info.ClusterQueue) {
		if cq := snapshot.ClusterQueue(info.ClusterQueue); cq == nil && !snapshot.InactiveClusterQueueSets.Has(info.ClusterQueue) {
			return fmt.Sprintf("ClusterQueue %s doesn't exist", info.ClusterQueue)
		}
		return fmt.Sprintf("ClusterQueue %s is inactive", info.ClusterQueue)
	}
	cq := snapshot.ClusterQueue(info.ClusterQueue)
	if err := workload.ValidateAdmissibility(ctx, o.client, info, cq.NamespaceSelector); err != nil {
		return err.Error()
	}
	return ""
}

// schedule runs the scheduler's cycles for one Workload until it is admitted, preempts, or is parked.
func (o *oracle) schedule(ctx context.Context, log logr.Logger, wl *kueue.Workload) (workloadOut, error) {
	info := workload.NewInfo(wl)
	result := workloadOut{Outcome: "pending", Messages: []string{}, Targets: []string{}}
	seen := map[string]bool{}
	for cycle := 0; cycle < o.cycles; cycle++ {
		o.cycle++
		snapshot, err := o.cache.Snapshot(ctx)
		if err != nil {
			return result, err
		}
		result.Cycles = cycle + 1
		if msg := o.blocker(ctx, info, snapshot); msg != "" {
			result.Messages = append(result.Messages, msg)
			return result, nil
		}
		cq := snapshot.ClusterQueue(info.ClusterQueue)
		// getInitialAssignments
		assigner := flavorassigner.New(info, cq, snapshot.ResourceFlavors, false,
			preemption.NewOracle(o.preemptor, snapshot), nil, configapi.QuotaCheckBlockUndeclared,
			resources.NewResourceFormatter(), o.cycle)
		assignment := assigner.Assign(ctx, nil)
		var targets []*preemption.Target
		if assignment.RepresentativeMode() == flavorassigner.Preempt {
			targets = o.preemptor.GetTargets(ctx, *info, assignment, snapshot)
		}
		// updateAssignmentForTAS
		if assignment.RepresentativeMode() == flavorassigner.Preempt &&
			(workload.IsExplicitlyRequestingTAS(wl.Spec.PodSets...) || cq.IsTASOnly()) {
			tasRequests := assignment.WorkloadsTopologyRequests(log, info, cq)
			var tasResult schdcache.TASAssignmentsResult
			if len(targets) > 0 {
				var victims []*workload.Info
				for _, t := range targets {
					victims = append(victims, t.WorkloadInfo)
				}
				revert := snapshot.SimulateWorkloadUsageRemoval(victims)
				tasResult = cq.FindTopologyAssignmentsForWorkload(ctx, tasRequests, schdcache.WithWorkload(wl))
				revert()
			} else {
				tasResult = cq.FindTopologyAssignmentsForWorkload(ctx, tasRequests, schdcache.WithSimulateEmpty(true),
					schdcache.WithWorkload(wl))
			}
			assignment.UpdateForTASResult(log, cq, info, tasResult)
		}
		switch mode := assignment.RepresentativeMode(); {
		case mode == flavorassigner.Fit:
			result.Admitted, result.Outcome = true, "admitted"
			result.PodSets = podSetsOut(assignment)
			admission := &kueue.Admission{ClusterQueue: info.ClusterQueue, PodSetAssignments: assignment.ToAPI(log)}
			o.clock.Step(time.Minute)
			workload.SetQuotaReservation(wl, admission, o.clock)
			o.cache.AddOrUpdateWorkload(log, wl)
			return result, nil
		case mode == flavorassigner.Preempt && len(targets) > 0 && !o.fitsAfter(log, cq, info, assignment, targets, snapshot):
			// processEntry: the usage to reserve, with the targets gone, must fit the quota (it counts `pods`,
			// which the preemption search leaves out)
			result.Messages = append(result.Messages, "Workload no longer fits after processing another workload")
		case mode == flavorassigner.Preempt && len(targets) > 0:
			result.Outcome = "preempt"
			result.PodSets = podSetsOut(assignment)
			for _, t := range targets {
				result.Targets = append(result.Targets, t.WorkloadInfo.Obj.Namespace+"/"+t.WorkloadInfo.Obj.Name)
			}
			result.Messages = append(result.Messages,
				fmt.Sprintf("%s. Pending the preemption of %d workload(s)", assignment.Message(), len(targets)))
			return result, nil
		}
		if mode := assignment.RepresentativeMode(); mode != flavorassigner.Preempt || len(targets) == 0 {
			result.Messages = append(result.Messages, assignment.Message())
		}
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
	return result, nil
}

// fitsAfter is the scheduler's `fits` check for an entry that preempts: its net usage, with the targets'
// usage removed from the snapshot.
func (o *oracle) fitsAfter(log logr.Logger, cq *schdcache.ClusterQueueSnapshot, info *workload.Info,
	assignment flavorassigner.Assignment, targets []*preemption.Target, snapshot *schdcache.Snapshot) bool {
	usage := workload.Usage{Quota: assignment.Usage.Quota, TAS: assignment.ComputeTASNetUsage(log, cq, info, nil)}
	var victims []*workload.Info
	for _, t := range targets {
		victims = append(victims, t.WorkloadInfo)
	}
	revert := snapshot.SimulateWorkloadUsageRemoval(victims)
	defer revert()
	return cq.Fits(usage) == schdcache.FitsCheckOk
}

func run(ctx context.Context, log logr.Logger, sc scenario) (map[string]any, error) {
	o, err := newOracle(ctx, log, sc)
	if err != nil {
		return nil, err
	}
	background := []backgroundOut{}
	for index, in := range sc.Background {
		wl, err := buildWorkload(in, fmt.Sprintf("uid-bg-%03d", index), o.clock.Now())
		if err != nil {
			return nil, fmt.Errorf("background %s: %w", in.Name, err)
		}
		o.clock.Step(time.Minute)
		result, err := o.schedule(ctx, log, wl)
		if err != nil {
			return nil, err
		}
		out := backgroundOut{Name: in.Name, Admitted: result.Admitted}
		if result.Admitted {
			out.Object = wl
		}
		background = append(background, out)
	}
	results := []workloadOut{}
	for index, in := range sc.Workloads {
		o.clock.Step(time.Minute)
		wl, err := buildWorkload(in, fmt.Sprintf("uid-%d", index), o.clock.Now())
		if err != nil {
			results = append(results, workloadOut{Error: err.Error()})
			break
		}
		result, err := o.schedule(ctx, log, wl)
		if err != nil {
			return nil, err
		}
		results = append(results, result)
		if !result.Admitted {
			break
		}
	}
	return map[string]any{"background": background, "workloads": results}, nil
}

// main reads one scenario, or a JSON array of them (one process for many: Kueue's packages take half a
// second to initialise), and prints the result, or an array of results in the same order (a scenario that
// cannot be run gives {"error": ...} in its place).
func main() {
	var raw json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&raw); err != nil {
		fmt.Fprintf(os.Stderr, "tas-oracle: reading the scenario: %v\n", err)
		os.Exit(2)
	}
	log := logr.Discard()
	ctx := ctrl.IntoContext(context.Background(), log)
	var out any
	if trimmed := strings.TrimLeft(string(raw), " \t\r\n"); strings.HasPrefix(trimmed, "[") {
		var scenarios []scenario
		if err := json.Unmarshal(raw, &scenarios); err != nil {
			fmt.Fprintf(os.Stderr, "tas-oracle: reading the scenarios: %v\n", err)
			os.Exit(2)
		}
		results := make([]any, 0, len(scenarios))
		for _, sc := range scenarios {
			result, err := run(ctx, log, sc)
			if err != nil {
				results = append(results, map[string]string{"error": err.Error()})
			} else {
				results = append(results, result)
			}
		}
		out = results
	} else {
		var sc scenario
		if err := json.Unmarshal(raw, &sc); err != nil {
			fmt.Fprintf(os.Stderr, "tas-oracle: reading the scenario: %v\n", err)
			os.Exit(2)
		}
		result, err := run(ctx, log, sc)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tas-oracle: %v\n", err)
			os.Exit(2)
		}
		out = result
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "tas-oracle: %v\n", err)
		os.Exit(2)
	}
}
