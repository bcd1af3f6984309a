package fabricsim

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// SetLibraryLogDir sends the logs of the libraries that log through glog
// (ygot's schema checks, which gNMI Set runs) to files in dir instead of
// the system temporary directory. glog is process-global, so
// call it once, early.
func SetLibraryLogDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make the directory for the emulated switches' gNMI logs: %w", err)
	}
	if f := flag.Lookup("log_dir"); f == nil {
		return errors.New("the gNMI library's logger is not linked in (its log_dir flag is missing)")
	}
	return flag.Set("log_dir", dir)
}
