//go:build race

package fabrictest

// raceEnabled: the race detector makes everything several times slower.
const raceEnabled = true
