package telemetry

import "math"

// PinWaitLooks is how many looks in a row a PinWait waits with no change
// of pins confirmed before it gives up on those left.
const PinWaitLooks = 10

// PinWait is a loop's wait for changes of flow pins to reach their
// switches before it judges measured load: traffic is hashed where a pin
// is not written yet, and reads as load on links its flow will leave. It
// waits for the changes under way when it began to wait (by their
// generation), not for later ones: where pins come and go all the time
// the loop still judges every other look. It waits for as long as the
// switches keep confirming them, however long that takes (a thousand
// intents moved at once on a starved machine), and gives up on those left
// once none was confirmed for PinWaitLooks looks in a row: a switch that
// keeps failing does not hold the loop for ever, and its changes are not
// waited for again. The zero value waits for nothing yet.
type PinWait struct {
	// upTo is the generation of the changes waited for (0: none).
	upTo uint64
	// givenUp: changes at or before it are not waited for.
	givenUp uint64
	// left is how many ports were still pending at the last look, and
	// stalled how many looks in a row found no fewer.
	left, stalled int
}

// Wait says whether to leave the load unjudged at this look. pending
// counts the ports whose last change of pins, made after generation
// after and at or before upTo, their switch has not confirmed, and
// returns the generation now.
func (w *PinWait) Wait(pending func(after, upTo uint64) (ports int, gen uint64)) bool {
	if w.upTo == 0 {
		n, gen := pending(w.givenUp, math.MaxUint64)
		if n == 0 {
			return false
		}
		w.upTo, w.left, w.stalled = gen, n, 0
		return true
	}
	n, _ := pending(w.givenUp, w.upTo)
	switch {
	case n == 0:
		w.upTo = 0 // they landed: judge (later changes are the next wait's)
		return false
	case n < w.left:
		w.left, w.stalled = n, 0
		return true
	case w.stalled+1 < PinWaitLooks:
		w.stalled++
		return true
	}
	w.givenUp, w.upTo = w.upTo, 0
	return false
}
