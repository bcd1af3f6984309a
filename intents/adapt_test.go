package intents

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/telemetry"
	"github.com/accelnet/accelnet/topology"
)

// TestHotIntentsAreTheIntentsOnHotLinks: adapt finds the intents it may
// move through the hot ports' pins. They must be exactly the ones looking
// at every intent finds: Installed, pinned, not moved lately, with a
// fabric hop (not the host's own port) measured at adaptHot or more,
// hottest first.
func TestHotIntentsAreTheIntentsOnHotLinks(t *testing.T) {
	snap, auth, stored := storedIntents(t, 3000)
	rng := rand.New(rand.NewPCG(1, 2))
	load := map[models.Endpoint]float64{}
	for l := range snap.AllFabricLinks() {
		for _, e := range [2]models.Endpoint{l.A, l.B} {
			load[e] = 0.95 * rng.Float64() // about one port in twenty hot
		}
	}
	for _, h := range snap.Hosts() {
		load[h.Attach] = 0.99 // every host's own port: no reason to move
	}
	util := func(e models.Endpoint) float64 { return load[e] }
	m := settledManager(t, snap, auth, stored, func(e models.Endpoint) (float64, bool) { return util(e), true })

	m.mu.Lock()
	defer m.mu.Unlock()
	for i, in := range stored {
		switch i % 7 {
		case 1:
			m.adaptive.moved[in.ID] = movedAt{round: m.adaptive.round, detectedRound: -jointHoldRounds}
		case 2:
			m.p.all[in.ID].in.Status.State = models.StateAdmitted
		}
	}
	var want []hot
	for id, e := range m.p.all {
		if e.in.Status.State != models.StateInstalled || !e.pinned || m.adaptive.movedLately(id, m.stats.DetectedRounds) {
			continue
		}
		worst := 0.0
		for _, f := range e.in.Status.Flows {
			for _, hop := range f.Path[:len(f.Path)-1] {
				worst = max(worst, util(hop))
			}
		}
		if worst >= adaptHot {
			want = append(want, hot{e, worst})
		}
	}
	slices.SortFunc(want, hottestFirst)
	if len(want) == 0 || len(want) > len(stored)/2 {
		t.Fatalf("the fixture has %d of %d intents on hot links: pick another", len(want), len(stored))
	}
	got := m.hotIntents(util)
	if len(got) != len(want) {
		t.Fatalf("%d intents found on hot links, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].e != want[i].e || got[i].worst != want[i].worst {
			t.Fatalf("hot intent %d: %s at %.3f, want %s at %.3f", i, got[i].e.in.ID, got[i].worst, want[i].e.in.ID, want[i].worst)
		}
	}
}

// TestAdaptLooksAtEveryHotIntentInTurn: a round looks for a cooler path
// for at most adaptMaxTries hot intents, those not looked at lately
// first, so with more than that hot (here every link, so none can move)
// each is looked at within a few rounds, and a round's work stays
// bounded.
func TestAdaptLooksAtEveryHotIntentInTurn(t *testing.T) {
	snap, auth, stored := storedIntents(t, 4096)
	m := settledManager(t, snap, auth, stored, func(models.Endpoint) (float64, bool) { return 0.95, true })
	observed := map[string]float64{}
	for _, in := range stored {
		observed[in.ID] = 0 // measured idle: each may be looked at
	}
	m.obs.mu.Lock()
	m.obs.byIntent = observed
	m.obs.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	hot := len(m.hotIntents(func(models.Endpoint) float64 { return 0.95 })) // those crossing a fabric link
	if hot <= 2*adaptMaxTries {
		t.Fatalf("%d hot intents: the fixture needs more than %d", hot, 2*adaptMaxTries)
	}
	looked := map[string]bool{}
	for round := 1; len(looked) < hot; round++ {
		m.adaptive.due = true
		m.housekeep(m.p.scratch(), false)
		this := 0
		for id, at := range m.adaptive.tried {
			if at == m.adaptive.round {
				this++
				if looked[id] {
					t.Fatalf("round %d looked at %s again before every other hot intent", round, id)
				}
				looked[id] = true
			}
		}
		if want := min(adaptMaxTries, hot-(round-1)*adaptMaxTries); this != want {
			t.Fatalf("round %d looked at %d hot intents, want %d", round, this, want)
		}
	}
	if m.stats.AdaptMoves != 0 {
		t.Fatalf("%d intents moved: every link is hot, none can", m.stats.AdaptMoves)
	}
}

// TestAdaptTrialLeavesPinsAsTheyWere: looking for cooler paths for hot
// intents that find none changes no pin: no switch is left with a change
// to confirm (one that was none, which no reconcile would confirm, kept
// adapt and the congestion weights from judging those ports for good).
func TestAdaptTrialLeavesPinsAsTheyWere(t *testing.T) {
	snap, auth, stored := storedIntents(t, 200)
	m := settledManager(t, snap, auth, stored, func(models.Endpoint) (float64, bool) { return 0.95, true })
	observed := map[string]float64{}
	for _, in := range stored {
		observed[in.ID] = 0
	}
	m.obs.mu.Lock()
	m.obs.byIntent = observed
	m.obs.mu.Unlock()
	_, gen := m.Overlay().PinsFor("")
	for _, sw := range snap.Switches() {
		m.Overlay().Synced(sw.Name, gen)
	}
	if n, _ := m.PinsPendingBetween(0, math.MaxUint64); n > 0 {
		t.Fatal("pins pending with every switch confirmed")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.adaptive.due = true
	m.housekeep(m.p.scratch(), false)
	if tried := len(m.adaptive.tried); tried == 0 || m.stats.AdaptMoves != 0 {
		t.Fatalf("%d hot intents looked at, %d moved: want some looked at and none moved (every link hot)", tried, m.stats.AdaptMoves)
	}
	if n, _ := m.PinsPendingBetween(0, math.MaxUint64); n > 0 {
		t.Fatal("a look for cooler paths that moved nothing left pins to confirm")
	}
}

// TestPinnedLoadIsWhatSendingIntentsSend: the load pinned flows put on
// each port is the measured rate of the intents sending (shared over
// their flows) along their paths; idle intents and rates of intents no
// longer there add nothing.
func TestPinnedLoadIsWhatSendingIntentsSend(t *testing.T) {
	snap, auth, stored := storedIntents(t, 200)
	m := settledManager(t, snap, auth, stored, func(models.Endpoint) (float64, bool) { return 0.5, true })
	sending := stored[7] // from its leaf's last host to the next leaf's first: across the fabric
	m.obs.mu.Lock()
	m.obs.byIntent = map[string]float64{sending.ID: 2, stored[15].ID: 0, "gone": 5}
	m.obs.mu.Unlock()
	got := m.PinnedLoad()
	want := map[models.Endpoint]float64{}
	for _, hop := range sending.Status.Flows[0].Path {
		want[hop] = 2
	}
	if len(want) < 2 {
		t.Fatalf("the sending intent's path %v stays on its leaf: pick another", sending.Status.Flows[0].Path)
	}
	for e, g := range got {
		if g != want[e] {
			t.Errorf("pinned load on %s: %.1f Gb/s, want %.1f", e, g, want[e])
		}
	}
	for e, g := range want {
		if got[e] != g {
			t.Errorf("pinned load on %s: %.1f Gb/s, want %.1f", e, got[e], g)
		}
	}
}

// TestPinnedLoadCountsUnmeasuredIntentsAtTheirReservation: an intent
// with no rate yet (Observe lists it as unmeasured) puts its reservation
// on every port of its path; once it has a rate, that rate instead.
func TestPinnedLoadCountsUnmeasuredIntentsAtTheirReservation(t *testing.T) {
	snap, auth, stored := storedIntents(t, 200)
	m := settledManager(t, snap, auth, stored, func(models.Endpoint) (float64, bool) { return 0.5, true })
	in := stored[7] // from its leaf's last host to the next leaf's first: across the fabric
	reserved := m.p.all[in.ID].flows[0].gbps
	check := func(want float64) {
		t.Helper()
		got := m.PinnedLoad()
		for _, hop := range in.Status.Flows[0].Path {
			if got[hop] != want {
				t.Errorf("pinned load on %s: %g Gb/s, want %g", hop, got[hop], want)
			}
		}
	}
	m.obs.mu.Lock()
	m.obs.byIntent, m.obs.unmeasured = map[string]float64{}, map[string]bool{in.ID: true}
	m.obs.mu.Unlock()
	check(reserved)
	m.obs.mu.Lock()
	m.obs.byIntent = map[string]float64{in.ID: 3}
	m.obs.mu.Unlock()
	check(3)
}

// TestPinnedLoadTakesTheSteadierRate: a pinned elephant's share of a
// link is the higher of its latest read's rate and its 2 s rate. The
// latest alone is timed by this process between two reads: on a busy
// machine one answered late reads tens of percent low, and the link's
// load (timed by the switch) would look like hashed traffic that
// congestion weights then cut for nothing.
func TestPinnedLoadTakesTheSteadierRate(t *testing.T) {
	m, err := New(Config{Store: &store.Store{}, Auth: tenantList{}})
	if err != nil {
		t.Fatal(err)
	}
	path := []models.Endpoint{{Switch: "leaf1", Port: 3}, {Switch: "spine1", Port: 2}}
	slow := models.FlowKey{SrcPort: 1}
	fast := models.FlowKey{SrcPort: 2}
	m.p.elephants = map[models.FlowKey]*elephant{slow: {path: path, demand: 50}, fast: {path: path, demand: 50}}
	m.obs.mu.Lock()
	m.obs.byFlow = map[models.FlowKey]measuredRate{
		slow: {gbps: 40, latest: 25}, // a read answered late
		fast: {gbps: 20, latest: 35}, // sped up: the 2 s rate lags
	}
	m.obs.mu.Unlock()
	got := m.PinnedLoad()
	for _, hop := range path {
		if got[hop] != 40+35 {
			t.Errorf("pinned load on %s: %.0f Gb/s, want 75 (40 of the first flow, 35 of the second)", hop, got[hop])
		}
	}
}

// TestAdaptJudgesAMovedPortByALaterReading: a port whose pins changed
// is judged only once its switch confirmed the change, by a sampling
// interval that began an interval or more after that (a switch may
// apply a change at its next sample). Its smoothed reading says 95%:
// while the change is unconfirmed, or the last interval began too soon
// after it, the intent on it stays (the load may be flows that left);
// once such an interval says so too, the intent moves off it.
func TestAdaptJudgesAMovedPortByALaterReading(t *testing.T) {
	snap, auth, stored := storedIntents(t, 200)
	moving := stored[7] // from its leaf's last host to the next leaf's first: across the fabric
	hop := moving.Status.Flows[0].Path[0]
	if hop.Switch == moving.Status.Flows[0].Path[len(moving.Status.Flows[0].Path)-1].Switch {
		t.Fatalf("intent %s stays on its leaf: pick another", moving.ID)
	}
	util := func(e models.Endpoint) (float64, bool) {
		if e == hop {
			return 0.95, true
		}
		return 0.1, true
	}
	m, adapt := measuredIdle(t, snap, auth, stored, util, moving.ID)
	// The sampling interval read last: from since, a second long.
	var since time.Time
	m.cfg.RecentUtilization = func(e models.Endpoint) (float64, time.Time, time.Time, bool) {
		u, _ := util(e)
		return u, since, since.Add(time.Second), true
	}
	// Another flow pinned through the port, not yet confirmed.
	gen := m.p.pins.lock()
	m.p.pins.set(hop.Switch, models.FlowKey{SrcPort: 7}, hop.Port)
	m.p.pins.unlock()
	since = time.Now().Add(time.Hour)
	adapt()
	if m.stats.AdaptMoves != 0 {
		t.Fatalf("%d intents moved off %s while a change of its pins was unconfirmed", m.stats.AdaptMoves, hop)
	}
	m.Overlay().Synced(hop.Switch, gen)
	confirmed, pending := m.p.pins.moved(hop)
	if pending || confirmed.IsZero() {
		t.Fatalf("confirmed the change of %s's pins: moved at %v, pending %v", hop, confirmed, pending)
	}
	for _, at := range []time.Duration{-time.Millisecond, time.Second - time.Millisecond} {
		since = confirmed.Add(at)
		adapt()
		if m.stats.AdaptMoves != 0 {
			t.Fatalf("%d intents moved off %s on a reading that began %s after its pins changed, want an interval (1s) or more", m.stats.AdaptMoves, hop, at)
		}
	}
	since = confirmed.Add(time.Second)
	adapt()
	if m.stats.AdaptMoves != 1 || m.p.all[moving.ID].in.Status.Flows[0].Path[0] == hop {
		t.Fatalf("%d intents moved, %s's first hop %s: want it moved off %s, measured hot after the change",
			m.stats.AdaptMoves, moving.ID, m.p.all[moving.ID].in.Status.Flows[0].Path[0], hop)
	}
}

// TestHoldDownGrowsForAnIntentMovedAgainAndAgain: an intent that moved
// sits out adaptHoldRounds adapt rounds; moved again soon after, twice
// as long each time (up to maxHoldShift doublings); moved again only
// long after, the plain hold-down again.
func TestHoldDownGrowsForAnIntentMovedAgainAndAgain(t *testing.T) {
	a := adaptState{moved: map[string]movedAt{}}
	// The elephants' placement rounds are kept far apart here, so that
	// only the adapt rounds hold it.
	detected := 0
	move := func() {
		detected += 1 << 20
		a.markMoved(&batch{}, "x", detected)
	}
	held := func() int { // adapt rounds it sits out from now
		n := 0
		for start := a.round; a.movedLately("x", detected+1<<19) && n < 1000; a.round++ {
			n = a.round - start + 1
		}
		return n
	}
	for i, want := range []int{1, 2, 4, 8, 16, 16} {
		move()
		if got := held(); got != adaptHoldRounds*want+1 {
			t.Fatalf("move %d soon after the last: held %d rounds, want %d", i+1, got, adaptHoldRounds*want+1)
		}
	}
	a.round += 10 * adaptHoldRounds << maxHoldShift
	move()
	if got := held(); got != adaptHoldRounds+1 {
		t.Fatalf("moved long after the last: held %d rounds, want %d", got, adaptHoldRounds+1)
	}
}

// TestAdaptWaitsForPinsOnTheirWay: a change of pins on a switch the hot
// intent does not cross holds adapt too (a flow whose pins are not all
// written is hashed, onto links it will leave), until the switch confirms
// it, or for telemetry.PinWaitLooks rounds if it confirms nothing.
func TestAdaptWaitsForPinsOnTheirWay(t *testing.T) {
	snap, auth, stored := storedIntents(t, 200)
	moving := stored[7] // across the fabric
	hop := moving.Status.Flows[0].Path[0]
	var elsewhere models.SwitchID
	for _, sw := range snap.Switches() {
		if !slices.ContainsFunc(moving.Status.Flows[0].Path, func(e models.Endpoint) bool { return e.Switch == sw.Name }) {
			elsewhere = sw.Name
			break
		}
	}
	util := func(e models.Endpoint) (float64, bool) {
		if e == hop {
			return 0.95, true
		}
		return 0.1, true
	}
	for _, confirms := range []bool{true, false} {
		m, adapt := measuredIdle(t, snap, auth, stored, util, moving.ID)
		gen := m.p.pins.lock()
		m.p.pins.set(elsewhere, models.FlowKey{SrcPort: 9}, 1)
		m.p.pins.unlock()
		rounds := 3
		if !confirms {
			rounds = telemetry.PinWaitLooks
		}
		for i := range rounds {
			adapt()
			if m.stats.AdaptMoves != 0 {
				t.Fatalf("confirms %v: %d intents moved in round %d with a change of pins on %s on its way", confirms, m.stats.AdaptMoves, i+1, elsewhere)
			}
		}
		if confirms {
			m.Overlay().Synced(elsewhere, gen)
		}
		adapt()
		if m.stats.AdaptMoves != 1 {
			t.Fatalf("confirms %v: %d intents moved once the wait was over, want %s moved off %s", confirms, m.stats.AdaptMoves, moving.ID, hop)
		}
	}
}

// measuredIdle is a settled manager whose intent id is measured idle,
// with a function running one adapt round.
func measuredIdle(t *testing.T, snap *topology.Snapshot, auth tenantList, stored []models.Intent, util func(models.Endpoint) (float64, bool), id string) (*Manager, func()) {
	m := settledManager(t, snap, auth, stored, util)
	m.obs.mu.Lock()
	m.obs.byIntent = map[string]float64{id: 0}
	m.obs.mu.Unlock()
	return m, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.adaptive.due = true
		m.housekeep(m.p.scratch(), false)
	}
}
