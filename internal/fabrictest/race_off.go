//go:build !race

package fabrictest

const raceEnabled = false
