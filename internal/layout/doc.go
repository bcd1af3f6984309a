// Package layout holds no code: its test states which package may depend
// on which, so an arrow the architecture forbids fails the build's tests
// (see docs/architecture.md).
package layout
