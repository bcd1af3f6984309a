// Command gen regenerates accelnet.json and accelnet.p4info.txt from
// accelnet.p4 with p4c-bm2-ss (run by go generate ./southbound/p4 in that
// directory). The compiler is $P4C_BM2_SS or p4c-bm2-ss on PATH; see
// docs for building it. A warning fails the run: the committed pipeline
// compiles cleanly.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/accelnet/accelnet/southbound/p4/p4c"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	compiler, err := p4c.Find()
	if err != nil {
		return err
	}
	src, err := os.ReadFile("accelnet.p4")
	if err != nil {
		return err
	}
	out, err := p4c.Compile(context.Background(), compiler, src)
	if err != nil {
		return err
	}
	if len(out.Warnings) > 0 {
		return fmt.Errorf("accelnet.p4 compiles with warnings:\n%v", out.Warnings)
	}
	if err := os.WriteFile("accelnet.json", out.JSON, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile("accelnet.p4info.txt", out.P4Info, 0o644); err != nil {
		return err
	}
	fmt.Printf("gen: accelnet.json and accelnet.p4info.txt from %s\n", out.Version)
	return nil
}
