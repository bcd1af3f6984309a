package fabrictest_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/fabricsim"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/fabrictest"
	"github.com/accelnet/accelnet/internal/stack"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/pathcalc"
	"github.com/accelnet/accelnet/topology"
)

// The live loop's convergence, measured against what a placement from
// scratch of the same flows would reach. A scenario is a sequence of
// phases (start a job, fail a link, drain a spine, …); after each change
// the loop must reach the one-shot placement's throughput ratio (within
// 2%), in a bounded number of placement rounds, and then move nothing.
// Waits are counted in placement rounds (one a second), with a generous
// wall-clock backstop only.

// loopFigures is what one phase of a scenario measured.
type loopFigures struct {
	phase    string
	live     float64       // the workloads' throughput ratio once settled
	oneShot  float64       // a placement from scratch of the same flows
	to95     time.Duration // change → live ≥ 0.95 × oneShot (-1: never)
	from95   time.Duration // first placement after the change → the same
	rounds   int           // placement rounds that moved something
	moved    int           // flows placed or moved, intents moved off hot links
	settleOK bool          // settled before the backstop
	// resettled counts settlings undone by a congestion weight that moved
	// in the rounds watched after them (see converge).
	resettled int
	writes    int64 // Write RPCs in settleRounds rounds after settling
	// what changed in those rounds, to say where writes came from.
	afterSettle string
}

func (f loopFigures) ratio() float64 {
	if f.oneShot <= 0 {
		return 1
	}
	return f.live / f.oneShot
}

const (
	// settleRounds placement rounds in a row without a move mean settled;
	// as many again are watched for writes.
	settleRounds = 3
	// maxLoopRounds bounds the rounds a phase may take to converge. A
	// congestion weight cut to its floor in a transient (ECMP collisions
	// before the elephants are pinned) takes nine recovery steps of three
	// intervals (a round each here) to come back, and the loop is not
	// settled until it has.
	maxLoopRounds = 45
)

// loopRun drives one scenario against a running controller and fabric.
type loopRun struct {
	tb   testing.TB
	h    *fabrictest.Harness
	fab  *fabricsim.Fabric
	snap *topology.Snapshot
	gbps float64 // each host's offered load
	// workloads whose flows count, and the fabric's state as the
	// scenario made it (the one-shot reference is computed from these,
	// not from the controller's view).
	workloads []string
	down      map[models.LinkID]bool
	figures   []loopFigures
	cut       map[models.Endpoint]float64 // the biases explainCuts saw last
}

func newLoopRun(tb testing.TB, h *fabrictest.Harness, fab *fabricsim.Fabric) *loopRun {
	tb.Helper()
	snap, err := topology.New(fab.Topology())
	if err != nil {
		tb.Fatal(err)
	}
	gbps := snap.Hosts()[0].NICGbps
	return &loopRun{tb: tb, h: h, fab: fab, snap: snap, gbps: gbps, down: map[models.LinkID]bool{}}
}

// start runs a line-rate permutation (one flow per host) and counts it.
func (r *loopRun) start(seed uint64) string {
	r.tb.Helper()
	id, err := r.fab.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: r.gbps, Seed: seed})
	if err != nil {
		r.tb.Fatal(err)
	}
	r.workloads = append(r.workloads, id)
	return id
}

// stop ends a workload; it no longer counts.
func (r *loopRun) stop(id string) {
	r.tb.Helper()
	if err := r.fab.StopWorkload(id); err != nil {
		r.tb.Fatal(err)
	}
	r.workloads = slices.DeleteFunc(r.workloads, func(w string) bool { return w == id })
}

// explainCuts logs, with ACCELNET_TEST_LOG set, each port whose
// congestion weight is newly cut: what the controller measures and
// counts as pinned there, and the flows fabricsim sends out of it, with
// the rate of each and whether a pin chose the port.
func (r *loopRun) explainCuts() {
	if os.Getenv("ACCELNET_TEST_LOG") == "" {
		return
	}
	biases := r.h.Controller.Biases()
	pinned := r.h.Intents.PinnedLoad()
	flows := r.fab.Flows()
	// The intents by flow, to say what became of one hashed.
	type flowKey struct {
		src, dst string
		port     uint16
	}
	owner := map[flowKey]models.Intent{}
	for after := ""; ; {
		page, next := r.h.Intents.List(intents.Scope{Operator: true}, intents.ListOptions{After: after, Limit: 1000})
		for _, in := range page {
			owner[flowKey{in.Spec.Src, in.Spec.Dst, in.Spec.SrcPorts.First}] = in
		}
		if after = next; next == "" {
			break
		}
	}
	for e, b := range biases {
		if was, ok := r.cut[e]; ok && was <= b {
			continue
		}
		load, _ := r.h.Controller.PortLoad(e)
		var out []string
		sum, pinnedHere := 0.0, 0.0
		for _, f := range flows {
			for _, hop := range f.Hops {
				if hop.Switch == e.Switch && hop.OutPort == e.Port {
					out = append(out, fmt.Sprintf("%s %s→%s:%d %.1f pinned=%t", f.Workload, f.Spec.Src, f.Spec.Dst, f.Spec.SrcPort, f.RateGbps, hop.Pinned))
					sum += f.RateGbps
					if hop.Pinned {
						pinnedHere += f.RateGbps
						continue
					}
					src, _ := r.snap.HostByIP(f.Spec.Src)
					dst, _ := r.snap.HostByIP(f.Spec.Dst)
					if in, ok := owner[flowKey{src.Name, dst.Name, f.Spec.SrcPort}]; ok {
						var path []models.Endpoint
						if len(in.Status.Flows) > 0 {
							path = in.Status.Flows[0].Path
						}
						out = append(out, fmt.Sprintf("(intent %s %s %q, its path %v; fabricsim's hops %v)", in.ID, in.Status.State, in.Status.Reason, path, f.Hops))
					}
				}
			}
		}
		fmt.Fprintf(os.Stderr, "%s weight cut at %v to %.2f: the controller measures %.1f Gb/s out (%.1f over the last reading) and counts %.1f as pinned; fabricsim sends %.1f, %.1f of it pinned there: %v",
			time.Now().UTC().Format(time.StampMilli), e, b, load.OutBps/1e9, load.RecentOutBps/1e9, pinned[e], sum, pinnedHere, out)
	}
	r.cut = biases
}

// flows are the counted workloads' flows as fabricsim forwards them.
func (r *loopRun) flows() []fabricsim.FlowStatus {
	var out []fabricsim.FlowStatus
	for _, f := range r.fab.Flows() {
		if slices.Contains(r.workloads, f.Workload) {
			out = append(out, f)
		}
	}
	return out
}

// detectedIsWorkload says whether the controller's detected elephants
// are the running workloads' flows: every flow between two leaves running
// clearly above the elephant threshold is listed, and nothing else is.
func (r *loopRun) detectedIsWorkload() bool {
	type key struct {
		src, dst string
		port     uint16
	}
	running := map[key]bool{}
	for _, f := range r.fab.Flows() {
		src, _ := r.snap.HostByIP(f.Spec.Src)
		dst, _ := r.snap.HostByIP(f.Spec.Dst)
		running[key{string(src.Name), string(dst.Name), f.Spec.SrcPort}] = src.Attach.Switch != dst.Attach.Switch && slices.Contains(r.workloads, f.Workload) && f.RateGbps >= 15
	}
	listed := map[key]bool{}
	for _, d := range r.h.Intents.DetectedFlows() {
		k := key{d.Src, d.Dst, d.SrcPort}
		if _, ok := running[k]; !ok {
			return false // a flow that stopped
		}
		listed[k] = true
	}
	for k, elephant := range running {
		if elephant && !listed[k] {
			return false
		}
	}
	return true
}

// live is the counted workloads' throughput ratio (Σ rates / Σ demands).
func (r *loopRun) live() float64 {
	sum, want := 0.0, 0.0
	for _, f := range r.flows() {
		sum += f.RateGbps
		want += f.Spec.DemandGbps
	}
	if want == 0 {
		return 1
	}
	return sum / want
}

// oneShot is the throughput ratio of a placement from scratch of the
// counted flows, on the fabric as the scenario left it (failed links
// out, drained switches' links out), over what intents reserve — or with
// the intents' flows placed from scratch too, if that does better.
func (r *loopRun) oneShot() float64 {
	r.tb.Helper()
	book, err := pathcalc.NewBook(r.snap, r.down, 0)
	if err != nil {
		r.tb.Fatal(err)
	}
	var list struct{ Items []models.Intent }
	for page := ""; ; {
		var resp struct {
			Items []models.Intent `json:"items"`
			Next  string          `json:"next_page_token"`
		}
		if code := r.getJSON("/api/v1/intents?limit=1000&page_token="+page, &resp); code != http.StatusOK {
			r.tb.Fatalf("list intents: HTTP %d", code)
		}
		list.Items = append(list.Items, resp.Items...)
		if resp.Next == "" {
			break
		}
		page = resp.Next
	}
	var reserved []pathcalc.Reserved
	for _, in := range list.Items {
		if !in.Status.State.Live() {
			continue
		}
		for _, f := range in.Status.Flows {
			src, errS := r.snap.Host(f.Src)
			dst, errD := r.snap.Host(f.Dst)
			if errS == nil && errD == nil && len(f.Path) > 0 {
				_ = book.Reserve(src, f.Path, f.Gbps)
				reserved = append(reserved, pathcalc.Reserved{Demand: pathcalc.Demand{Src: src, Dst: dst, Gbps: f.Gbps}, Path: f.Path})
			}
		}
	}
	var demands []pathcalc.Demand
	for _, f := range r.flows() {
		src, errS := r.snap.HostByIP(f.Spec.Src)
		dst, errD := r.snap.HostByIP(f.Spec.Dst)
		if errS != nil || errD != nil {
			r.tb.Fatalf("flow %d between unknown hosts", f.ID)
		}
		demands = append(demands, pathcalc.Demand{Src: src, Dst: dst, Gbps: f.Spec.DemandGbps})
	}
	if len(demands) == 0 {
		return 1
	}
	placed, err := book.PlaceBest(context.Background(), demands, nil)
	if err != nil {
		r.tb.Fatal(err)
	}
	best := placed.OneShot
	if len(reserved) > 0 { // or with the intents placed from scratch too
		joint, ok, err := book.PlaceJoint(context.Background(), reserved, demands)
		if err != nil {
			r.tb.Fatal(err)
		}
		if ok {
			best = max(best, joint.Throughput)
		}
	}
	return best
}

// modelLive is the model's throughput ratio of the paths the counted flows
// take now (debugging the model against fabricsim).
func (r *loopRun) modelLive() float64 {
	book, _ := pathcalc.NewBook(r.snap, r.down, 0)
	var list struct {
		Items []models.Intent `json:"items"`
	}
	r.getJSON("/api/v1/intents?limit=1000", &list)
	for _, in := range list.Items {
		for _, f := range in.Status.Flows {
			if src, err := r.snap.Host(f.Src); err == nil && len(f.Path) > 0 {
				_ = book.Reserve(src, f.Path, f.Gbps)
			}
		}
	}
	var demands []pathcalc.Demand
	var paths [][]models.Endpoint
	for _, f := range r.flows() {
		src, _ := r.snap.HostByIP(f.Spec.Src)
		dst, _ := r.snap.HostByIP(f.Spec.Dst)
		demands = append(demands, pathcalc.Demand{Src: src, Dst: dst, Gbps: f.Spec.DemandGbps})
		var p []models.Endpoint
		for _, h := range f.Hops {
			p = append(p, models.Endpoint{Switch: h.Switch, Port: h.OutPort})
		}
		paths = append(paths, p)
	}
	return book.Throughput(demands, paths)
}

func (r *loopRun) getJSON(path string, v any) int {
	r.tb.Helper()
	resp := r.h.Do(r.tb, "GET", path, r.h.OperatorToken, nil, v)
	return resp.StatusCode
}

// converge waits, after a change, until the loop settles (settleRounds
// placement rounds in a row without a move or a congestion weight change,
// every rollout finished), then watches settleRounds more rounds for
// writes (settling again if a congestion weight moved in them, within the
// bound on rounds), and records the phase's figures.
func (r *loopRun) converge(phase string) loopFigures {
	r.tb.Helper()
	start := time.Now()
	fig := loopFigures{phase: phase, oneShot: r.oneShot(), to95: -1, from95: -1}
	in := r.h.Intents
	// Moves are the detected elephants', the intents' moved off links
	// measured hot and those moved to make room for the elephants: all
	// are the loop acting.
	loopMoves := func() int { return in.Stats().DetectedMoves + in.Stats().AdaptMoves + in.Stats().JointMoves }
	rounds0 := in.Stats().DetectedRounds
	// The congestion weights are a loop of their own, slower than
	// placement (a cut needs two hot intervals, a step back three calm
	// ones): a round in which they moved is not quiet either.
	weights0 := r.h.Controller.WeightChanges()
	var firstPlaced time.Time
	backstop := time.Now().Add(3 * time.Minute)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	// settle waits for settleRounds quiet rounds with every rollout done.
	// Quiet rounds in which only a congestion weight's way back up keeps
	// the controller unsettled do not count toward the bound: the weights
	// step up on their own clock (three calm readings a step), which a
	// busy machine slows (stale readings do not count as calm), while
	// placement rounds keep ticking; the backstop still bounds them.
	excused := 0
	// reached95 notes when the workloads first reach 95% of the one-shot
	// placement's throughput: while the loop settles, and after, while
	// the switches take what it settled on.
	reached95 := func() {
		if fig.to95 < 0 && r.live() >= 0.95*fig.oneShot {
			fig.to95 = time.Since(start)
			if !firstPlaced.IsZero() {
				fig.from95 = time.Since(firstPlaced)
			}
		}
	}
	settle := func() bool {
		lastRound, lastMoves, lastWeights, lastWaits, quiet := in.Stats().DetectedRounds, loopMoves(), r.h.Controller.WeightChanges(), in.Stats().JointWaits, 0
		for quiet < settleRounds || !r.h.Controller.Settled() {
			if time.Now().After(backstop) || in.Stats().DetectedRounds-rounds0-excused > maxLoopRounds {
				break
			}
			<-poll.C
			reached95()
			round, moves := in.Stats().DetectedRounds, loopMoves()
			if round == lastRound {
				continue
			}
			if !r.detectedIsWorkload() {
				// The loop has not seen the change yet (samples take a moment,
				// more on a busy machine): its rounds do not count as quiet.
				lastRound, quiet = round, 0
				continue
			}
			weights, waits := r.h.Controller.WeightChanges(), in.Stats().JointWaits
			switch {
			case moves != lastMoves:
				fig.rounds++
				fig.moved += moves - lastMoves
				quiet = 0
				if firstPlaced.IsZero() {
					firstPlaced = time.Now()
				}
			case weights != lastWeights, waits != lastWaits:
				// A round whose joint placement waited for intents to be
				// measured has not decided yet: it is not quiet either.
				quiet = 0
				if weights != lastWeights {
					r.explainCuts()
				}
			default:
				quiet++
				if quiet > settleRounds && r.h.Controller.Unsettled() == controller.UnsettledWeights {
					excused += int(round - lastRound)
				}
			}
			lastRound, lastMoves, lastWeights, lastWaits = round, moves, weights, waits
		}
		fig.settleOK = quiet >= settleRounds && r.h.Controller.Settled()
		if !fig.settleOK {
			fig.afterSettle = fmt.Sprintf("%d placement rounds, %d congestion weight changes since the change; biases now %v; the last %d rounds quiet (no move, no weight change); unsettled: %q",
				in.Stats().DetectedRounds-rounds0, r.h.Controller.WeightChanges()-weights0, r.h.Controller.Biases(), quiet, r.h.Controller.Unsettled())
		}
		return fig.settleOK
	}
	// Settled, the loop then writes nothing for settleRounds more rounds.
	// A congestion weight that moves in them (a link found hot for the
	// second interval in a row only now: on a busy machine the readings
	// lag) is the weight loop still converging, not churn: settle again,
	// within the same bound on rounds. Writes with no weight change, or
	// past the bound, are what the test catches.
	for settle() {
		if testing.Verbose() {
			r.tb.Logf("settled: %s", phase)
		}
		writes := r.fab.WriteRPCs()
		perSwitch := r.switchWrites()
		biases, moves, rounds, weights := r.h.Controller.Biases(), loopMoves(), in.Stats().DetectedRounds, r.h.Controller.WeightChanges()
		detected, adapted, joint := in.Stats().DetectedMoves, in.Stats().AdaptMoves, in.Stats().JointMoves
		for target := in.Stats().DetectedRounds + settleRounds; in.Stats().DetectedRounds < target && time.Now().Before(backstop.Add(time.Minute)); {
			<-poll.C
			reached95() // the switches may still be taking what the loop settled on
		}
		fig.writes = r.fab.WriteRPCs() - writes
		if fig.writes == 0 {
			break
		}
		var written []string
		for sw, n := range r.switchWrites() {
			if d := n - perSwitch[sw]; d > 0 {
				written = append(written, fmt.Sprintf("%s:%d", sw, d))
			}
		}
		sort.Strings(written)
		fig.afterSettle = fmt.Sprintf("written %v; %d placement rounds, %d flows moved (%d elephants, %d intents off hot links, %d intents to make room for elephants), %d weight changes; weight biases %v → %v; settled now %v",
			written, in.Stats().DetectedRounds-rounds, loopMoves()-moves, in.Stats().DetectedMoves-detected, in.Stats().AdaptMoves-adapted, in.Stats().JointMoves-joint,
			r.h.Controller.WeightChanges()-weights, biases, r.h.Controller.Biases(), r.h.Controller.Settled())
		if loopMoves() != moves || r.h.Controller.WeightChanges() == weights || in.Stats().DetectedRounds-rounds0 > maxLoopRounds {
			break
		}
		fig.resettled++
	}
	if fig.to95 >= 0 && fig.from95 < 0 {
		fig.from95 = 0 // at 95% before any placement (nothing to fix)
	}
	fig.live = r.live()
	if os.Getenv("DEBUG_LOOP") != "" {
		r.tb.Logf("model of the live paths: %.3f; controller's last: %+v", r.modelLive(), r.h.Intents.Stats().DetectedQuality.Throughput)
		for _, f := range r.fab.Flows() {
			r.tb.Logf("flow %d %s %s:%d->%s %.1f/%.1f %+v", f.ID, f.Workload, f.Spec.Src, f.Spec.SrcPort, f.Spec.Dst, f.RateGbps, f.Spec.DemandGbps, f.Hops)
		}
	}
	r.figures = append(r.figures, fig)
	return fig
}

// switchWrites is every switch's Write RPCs so far.
func (r *loopRun) switchWrites() map[models.SwitchID]int64 {
	out := map[models.SwitchID]int64{}
	for _, sw := range r.snap.Switches() {
		if s := r.fab.Switch(sw.Name); s != nil {
			out[sw.Name], _ = s.WriteStats()
		}
	}
	return out
}

// failLink takes a fabric link down in fabricsim (the controller finds
// out from gNMI oper-status) or brings it back.
func (r *loopRun) failLink(id models.LinkID, up bool) {
	r.tb.Helper()
	if err := r.fab.SetLinkUp(id, up); err != nil {
		r.tb.Fatal(err)
	}
	if up {
		delete(r.down, id)
	} else {
		r.down[id] = true
	}
}

// drain drains a switch through the API and returns the drain's ID.
func (r *loopRun) drain(sw models.SwitchID) string {
	r.tb.Helper()
	var d models.Drain
	if resp := r.h.Do(r.tb, "POST", "/api/v1/drains", r.h.OperatorToken, models.Drain{Switch: sw}, &d); resp.StatusCode != http.StatusCreated {
		r.tb.Fatalf("drain %s: HTTP %d", sw, resp.StatusCode)
	}
	for _, l := range r.snap.FabricLinks() {
		if l.A.Switch == sw || l.B.Switch == sw {
			r.down[l.ID()] = true
		}
	}
	return d.ID
}

// undrain ends a drain.
func (r *loopRun) undrain(id string, sw models.SwitchID) {
	r.tb.Helper()
	if resp := r.h.Do(r.tb, "DELETE", "/api/v1/drains/"+id, r.h.OperatorToken, nil, nil); resp.StatusCode != http.StatusNoContent {
		r.tb.Fatalf("undrain %s: HTTP %d", id, resp.StatusCode)
	}
	for _, l := range r.snap.FabricLinks() {
		if l.A.Switch == sw || l.B.Switch == sw {
			delete(r.down, l.ID())
		}
	}
}

// firstOf returns the first switch of a role (by name order).
func (r *loopRun) firstOf(role models.Role) models.SwitchID {
	for _, sw := range r.snap.Switches() {
		if sw.Role == role {
			return sw.Name
		}
	}
	r.tb.Fatalf("no %s", role)
	return ""
}

// loopScenario is one way the fabric's traffic or state changes.
type loopScenario struct {
	name string
	// serve: the scenario restarts the controller, so it runs against a
	// fabric in its own right (as accelnet serve does).
	serve bool
	run   func(r *loopRun, seed uint64)
}

var loopScenarios = []loopScenario{
	{name: "cold-start", run: func(r *loopRun, seed uint64) {
		r.start(seed)
		r.converge("workload starts")
	}},
	{name: "detected-in-rounds", run: func(r *loopRun, seed uint64) {
		// Half the flows first; once they are placed, the other half:
		// the second half is detected rounds after the first.
		id := r.start(seed)
		flows := r.flows()
		slices.SortFunc(flows, func(a, b fabricsim.FlowStatus) int { return int(a.ID) - int(b.ID) })
		var rest []fabricsim.FlowSpec
		var restIDs []uint64
		for i, f := range flows {
			if i%2 == 1 {
				rest = append(rest, f.Spec)
				restIDs = append(restIDs, f.ID)
			}
		}
		r.fab.RemoveFlows(restIDs)
		r.converge("half the flows")
		r.stop(id)
		id2 := r.start(seed) // the same permutation again, whole, new flow IDs
		r.converge("the other half joins")
		_ = id2
	}},
	{name: "jobs-start-stop", run: func(r *loopRun, seed uint64) {
		id := r.start(seed)
		r.converge("job 1 starts")
		r.stop(id)
		r.start(seed + 1000)
		r.converge("job 1 stops, job 2 starts")
	}},
	{name: "link-fails-returns", run: func(r *loopRun, seed uint64) {
		r.start(seed)
		r.converge("workload starts")
		tier := models.RoleSpine // on a fat-tree, the aggregation switches
		var link models.LinkID
		for _, l := range r.snap.FabricLinks() {
			if (l.A.Switch == r.firstOf(models.RoleLeaf) || l.B.Switch == r.firstOf(models.RoleLeaf)) && (roleOf(r.snap, l.A.Switch) == tier || roleOf(r.snap, l.B.Switch) == tier) {
				link = l.ID()
				break
			}
		}
		r.failLink(link, false)
		r.converge("an uplink of the first leaf fails")
		r.failLink(link, true)
		r.converge("the uplink returns")
	}},
	{name: "drain-undrain", run: func(r *loopRun, seed uint64) {
		r.start(seed)
		r.converge("workload starts")
		sw := r.firstOf(models.RoleSpine)
		id := r.drain(sw)
		r.converge("drained " + string(sw))
		r.undrain(id, sw)
		r.converge("undrained " + string(sw))
	}},
	{name: "intents-reloaded", serve: true}, // run by runLoopScenario: it restarts the controller
}

func roleOf(snap *topology.Snapshot, id models.SwitchID) models.Role {
	sw, _ := snap.Switch(id)
	return sw.Role
}

// loopOptions are the controller's options in these scenarios: sampling
// as the demo does it (1 in 65,536 at 400 Gb/s; 1 in 4,096 for the test
// fabrics' 100 Gb/s hosts, which send fewer packets: fabricsim reports
// at most 4,096 samples per switch and tick, as a switch's digest engine
// would drop past its rate).
func loopOptions(gbps float64) func(*stack.Config) {
	return func(o *stack.Config) {
		o.Elephants.SampleOneIn = 65536
		if gbps < 400 {
			o.Elephants.SampleOneIn = 4096
		}
		o.Elephants.ObserveInterval = time.Second
		o.CounterInterval = 500 * time.Millisecond
		o.TelemetryInterval = 500 * time.Millisecond
		o.CongestionInterval = time.Second
	}
}

// runLoopScenario runs one scenario with one seed on a fresh controller
// and fabric and returns its phases' figures.
func runLoopScenario(tb testing.TB, topo models.Topology, sc loopScenario, seed uint64) []loopFigures {
	tb.Helper()
	gbps := topo.Hosts[0].NICGbps
	if !sc.serve {
		h := fabrictest.NewWith(tb, topo, loopOptions(gbps))
		h.Eventually(tb, 2*time.Minute, "fabric programmed", func() bool { return h.Converged() == nil })
		r := newLoopRun(tb, h, h.Fabric)
		sc.run(r, seed)
		h.Stop()
		return r.figures
	}
	// intents-reloaded: a job declared as intents (a tenth of every NIC,
	// with its traffic), the controller restarted, then a line-rate
	// permutation nobody declared.
	fab, stopFabric := fabrictest.RunFabric(tb, topo, func(o *fabricsim.Options) { o.CounterInterval = 500 * time.Millisecond })
	defer stopFabric()
	dir := tb.TempDir()
	serve := func() *fabrictest.Harness {
		h := fabrictest.NewServeWith(tb, fab.Topology(), func(o *stack.Config) {
			loopOptions(gbps)(o)
			o.Etcd.Dir = dir
		})
		h.Eventually(tb, 2*time.Minute, "fabric programmed", func() bool { return h.Converged() == nil })
		return h
	}
	h := serve()
	token := h.OperatorToken // issued on the first start only
	job, err := fab.StartWorkload(fabricsim.WorkloadSpec{Pattern: fabricsim.PatternPermutation, Gbps: gbps / 10, Seed: seed + 500})
	if err != nil {
		tb.Fatal(err)
	}
	declareWorkload(tb, h, fab, job, "jobs")
	h.Stop()
	h = serve()
	h.OperatorToken = token
	// Reloaded records say Installed at once; wait until they are placed
	// on the fabric again (the ledger rebuilt, their pins derived), or the
	// job's elephants may be placed around a ledger still empty and
	// moved again when it fills.
	h.Eventually(tb, 5*time.Minute, "the intents reloaded, placed and installed", func() bool {
		return h.Intents.Counts()[models.StateInstalled] > 0 && h.Intents.Overlay().PinsReady() && h.Controller.Settled()
	})
	r := newLoopRun(tb, h, fab)
	r.start(seed)
	r.converge("line-rate job after a restart with a tenth of every NIC reserved")
	h.Stop()
	return r.figures
}

// declareWorkload declares a running workload's flows (between leaves) as
// intents of tenant, at their demand less 5% headroom, and waits until
// every one is installed.
func declareWorkload(tb testing.TB, h *fabrictest.Harness, fab *fabricsim.Fabric, workload string, tenant models.TenantName) {
	tb.Helper()
	if _, err := h.Auth.PutTenant(context.Background(), models.Tenant{Name: tenant}, nil); err != nil {
		tb.Fatal(err)
	}
	snap, err := topology.New(fab.Topology())
	if err != nil {
		tb.Fatal(err)
	}
	var specs []models.IntentSpec
	for _, f := range fab.Flows() {
		src, _ := snap.HostByIP(f.Spec.Src)
		dst, _ := snap.HostByIP(f.Spec.Dst)
		if f.Workload != workload || src.Attach.Switch == dst.Attach.Switch {
			continue
		}
		specs = append(specs, models.IntentSpec{Name: fmt.Sprintf("%s-%d", workload, f.ID), Src: src.Name, Dst: dst.Name,
			Gbps: f.Spec.DemandGbps * 0.95, SrcPorts: models.PortRange{First: f.Spec.SrcPort, Last: f.Spec.SrcPort}})
	}
	if _, err := h.Intents.CreateBatch(context.Background(), tenant, specs); err != nil {
		tb.Fatal(err)
	}
	h.Eventually(tb, 5*time.Minute, "the job's intents installed", func() bool {
		return h.Intents.Counts()[models.StateInstalled] == len(specs)
	})
}

// TestLoopConverges runs every scenario once on a small fabric: after
// each change the loop reaches the one-shot placement's throughput ratio
// (within 2%) in a bounded number of rounds, settles, and then writes
// nothing to any switch. BenchmarkConvergence runs them at scale.
func TestLoopConverges(t *testing.T) {
	topo, err := topology.Load("leafspine:4x4x4@100")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range loopScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel() // each its own fabric; they wait on rounds, mostly idle
			checkConverged(t, runLoopScenario(t, topo, sc, 7))
		})
	}
}

// checkConverged fails a phase that did not settle, did not reach the
// one-shot placement's throughput ratio (within 2%), or wrote to a
// switch once settled.
func checkConverged(t *testing.T, figs []loopFigures) {
	t.Helper()
	for _, f := range figs {
		t.Logf("%s: live %.3f, one-shot %.3f, %d rounds, %d moved, 95%% after %s, %d writes once settled (settled again %d times after a late weight change)",
			f.phase, f.live, f.oneShot, f.rounds, f.moved, f.to95.Round(time.Millisecond), f.writes, f.resettled)
		switch {
		case !f.settleOK:
			t.Errorf("%s: not settled after %d placement rounds (%s)", f.phase, maxLoopRounds, f.afterSettle)
		case f.ratio() < 0.98:
			t.Errorf("%s: throughput ratio %.3f, %.3f of the one-shot placement's %.3f", f.phase, f.live, f.ratio(), f.oneShot)
		case f.writes != 0:
			t.Errorf("%s: %d Write RPCs in %d rounds after settling, want none (%s)", f.phase, f.writes, settleRounds, f.afterSettle)
		}
	}
}

// TestLoopConvergesAtK16: the cold start on a leaf-spine of 16 spines,
// 16 leaves and 16 hosts each (256 hosts at 400 Gb/s, sampling as the
// demo samples), once: the loop reaches the one-shot placement and then
// writes nothing, as it does on the small fabric. BenchmarkConvergence
// runs every scenario at this size and on the k=16 fat-tree.
//
// It runs when ACCELNET_LOOP_K16=1 only. Idle it passes in 8 s, and
// under -race beside two CPU burners in 10 s. Under -race beside two
// burners with another package's race tests running too (as in the
// whole suite) it did not settle: a stalled leaf's pinned elephants were
// silenced together and pinned again a second later, and congestion
// weights ratcheted from 11 biased ports to 62 in 30 s. The elephants
// now wait out a quiet leaf (TestElephantsKeptWhileTheirLeafIsQuiet),
// and the weights wait for pins on their way (TestWeightsWaitForPins).
// Beside two burners and three other packages' race tests it passed
// once in four runs, and failed three of three on 2026-12-07: pinned
// elephants dropped as unheard, their pin counters unread for 13–16 s
// (reads cut short by their deadline, or refused whole for naming a pin
// not there yet). Those reads are fixed (docs/scaling.md, "Quiet once
// settled"); two runs after still did not settle in 45 rounds, one on
// congestion weights cut from skewed readings, one with reconciles
// still queued.
func TestLoopConvergesAtK16(t *testing.T) {
	if os.Getenv("ACCELNET_LOOP_K16") != "1" {
		t.Skip("ACCELNET_LOOP_K16=1 runs it (see its doc)")
	}
	topo, err := topology.Load("leafspine:16x16x16")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(loopScenarios, func(sc loopScenario) bool { return sc.name == "cold-start" })
	checkConverged(t, runLoopScenario(t, topo, loopScenarios[i], 1))
}

// TestSaturatedFabricWritesNothing: a 2:1 fabric runs a line-rate
// permutation, so every uplink is saturated and no placement or weight
// can do better. Once the loop settles, nothing is re-programmed for
// ten placement rounds (congestion weights looked at twice a round).
func TestSaturatedFabricWritesNothing(t *testing.T) {
	topo, err := topology.Load("leafspine:4x4x2@100")
	if err != nil {
		t.Fatal(err)
	}
	h := fabrictest.NewWith(t, topo, func(o *stack.Config) {
		loopOptions(100)(o)
		o.CongestionInterval = 500 * time.Millisecond
	})
	h.Eventually(t, time.Minute, "fabric programmed", func() bool { return h.Converged() == nil })
	r := newLoopRun(t, h, h.Fabric)
	r.start(3)
	f := r.converge("saturated")
	if !f.settleOK || f.writes != 0 {
		t.Fatalf("settled %v, %d writes after", f.settleOK, f.writes)
	}
	writes, rounds := h.Fabric.WriteRPCs(), h.Intents.Stats().DetectedRounds
	h.Eventually(t, time.Minute, "ten more placement rounds", func() bool { return h.Intents.Stats().DetectedRounds >= rounds+10 })
	if n := h.Fabric.WriteRPCs() - writes; n != 0 {
		t.Errorf("%d Write RPCs in ten rounds on a steady saturated fabric; biases %v", n, h.Controller.Biases())
	}
	if f.live < 0.49 || f.ratio() < 0.98 {
		t.Errorf("throughput ratio %.3f, one-shot %.3f", f.live, f.oneShot)
	}
}

// BenchmarkConvergence runs every scenario with ACCELNET_SEEDS seeds
// (default 10) on each fabric of the convergence table and prints a row
// per fabric and scenario: the worst final throughput ratio ÷ the
// one-shot placement's, the time from the first placement after a change
// to 95% of the one-shot's ratio (p95 over seeds and phases), rounds and
// flows moved per phase, and Write RPCs once settled (the most seen).
// Seeds are not b.N: a benchmark runs once with b.N = 1 before the count
// asked for, which would cost a whole extra pass. The table goes to
// standard output (go test truncates a benchmark's log).
//
//	go test ./internal/fabrictest -run '^$' -bench 'Convergence/leafspine:8x8x8$' -benchtime 1x -timeout 3h
//
// Fabrics: leafspine:8x8x8, leafspine:16x16x16, fattree:8, fattree:16
// (400 Gb/s, sampling 1 in 65,536 as the demo does).
// ACCELNET_SCENARIOS=cold-start,drain-undrain runs only those, and
// ACCELNET_SEED=8 only the seed a line of the output names.
// ACCELNET_CONVERGE_BURN=nice runs beside a CPU burner at the lowest
// priority (the test binary spinning, as nice -n 19 yes), which takes
// the cores whenever the loop leaves them. Each fabric also reports, over
// every scenario and seed, the worst ratio, the worst p95, the most
// writes once settled and the phases that did not settle.
func BenchmarkConvergence(b *testing.B) {
	seeds := 10
	if n, err := strconv.Atoi(os.Getenv("ACCELNET_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	if os.Getenv("ACCELNET_CONVERGE_BURN") == "nice" {
		burn(b, "cpu", 19) // beside a CPU burner at the lowest priority
	}
	onlyScenarios, onlySeed := os.Getenv("ACCELNET_SCENARIOS"), os.Getenv("ACCELNET_SEED")
	for _, fabric := range []string{"leafspine:8x8x8", "leafspine:16x16x16", "fattree:8", "fattree:16"} {
		b.Run(fabric, func(b *testing.B) {
			topo, err := topology.Load(fabric)
			if err != nil {
				b.Fatal(err)
			}
			var rows []string
			all := loopSummary{worst: math.Inf(1)}
			for _, sc := range loopScenarios {
				if onlyScenarios != "" && !slices.Contains(strings.Split(onlyScenarios, ","), sc.name) {
					continue
				}
				var figs []loopFigures
				for range b.N {
					for seed := range seeds {
						if onlySeed != "" && onlySeed != strconv.Itoa(seed+1) {
							continue
						}
						for _, f := range runLoopScenario(b, topo, sc, uint64(seed+1)) {
							if f.writes != 0 || !f.settleOK { // what the loop did, for the table's last column
								fmt.Printf("%s %s seed %d, %s: settled %v, %d writes once settled: %s\n", fabric, sc.name, seed+1, f.phase, f.settleOK, f.writes, f.afterSettle)
							}
							figs = append(figs, f)
						}
					}
				}
				sum := summarize(figs)
				all.worst, all.p95, all.writes, all.unsettled = min(all.worst, sum.worst), max(all.p95, sum.p95), max(all.writes, sum.writes), all.unsettled+sum.unsettled
				rows = append(rows, sum.row(fabric, sc.name))
				fmt.Println(rows[len(rows)-1]) // as it comes: a long run shows progress
			}
			fmt.Printf("\n%d seeds:\n\n| fabric | scenario | worst ratio ÷ one-shot | p95 first placement → 95%% | rounds | moved | writes once settled |\n|---|---|---|---|---|---|---|\n%s\n\n", seeds, strings.Join(rows, "\n"))
			// Over every scenario and seed: the worst, for a table
			// of measured figures (benchreport).
			b.ReportMetric(all.worst, "worst_ratio")
			b.ReportMetric(float64(all.p95.Milliseconds()), "worst_p95_to95_ms")
			b.ReportMetric(float64(all.writes), "writes_once_settled")
			b.ReportMetric(float64(all.unsettled), "unsettled_phases")
		})
	}
}

// loopSummary is a scenario's phases over seeds: the worst throughput
// ratio ÷ the one-shot's, the p95 of first placement → 95% of it, the
// mean rounds and flows moved, the most Write RPCs once settled, and how
// many phases did not settle.
type loopSummary struct {
	worst         float64
	p95           time.Duration
	rounds, moved float64
	writes        int64
	unsettled     int
}

// row is s as a table row.
func (s loopSummary) row(fabric, scenario string) string {
	note := ""
	if s.unsettled > 0 {
		note = fmt.Sprintf(" (%d phases unsettled)", s.unsettled)
	}
	return fmt.Sprintf("| %s | %s | %.3f | %s | %.1f | %.0f | %d%s |", fabric, scenario, s.worst, s.p95.Round(10*time.Millisecond), s.rounds, s.moved, s.writes, note)
}

// summarize sums a scenario's phases up over seeds.
func summarize(figs []loopFigures) loopSummary {
	worst, rounds, moved := math.Inf(1), 0.0, 0.0
	var to95 []time.Duration
	var writes int64
	unsettled := 0
	for _, f := range figs {
		worst = min(worst, f.ratio())
		rounds += float64(f.rounds)
		moved += float64(f.moved)
		writes = max(writes, f.writes)
		if !f.settleOK {
			unsettled++
		}
		if f.from95 < 0 {
			to95 = append(to95, time.Hour) // never
		} else {
			to95 = append(to95, f.from95)
		}
	}
	sort.Slice(to95, func(i, j int) bool { return to95[i] < to95[j] })
	p95 := to95[min(len(to95)-1, int(math.Ceil(0.95*float64(len(to95))))-1)]
	n := float64(len(figs))
	return loopSummary{worst: worst, p95: p95, rounds: rounds / n, moved: moved / n, writes: writes, unsettled: unsettled}
}
