package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// envPrefix starts the environment variable of every flag.
const envPrefix = "ACCELNET_"

// envName is the environment variable of a flag: ACCELNET_ETCD_ENDPOINTS
// for --etcd-endpoints.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyConfig fills the flags not given on the command line from the
// environment, then from the YAML file (if any): command line, then
// environment, then file, then defaults. An unknown key in the file is an
// error, so a typo does not go unseen.
func applyConfig(fs *pflag.FlagSet, file string, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("--config %s: %w", file, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil {
			return fmt.Errorf("--config %s: %q is not a flag of this command", file, k)
		}
		if f.Changed {
			continue // the command line or the environment said otherwise
		}
		v := values[k]
		var s string
		switch x := v.(type) {
		case []any:
			parts := make([]string, len(x))
			for i, p := range x {
				parts[i] = fmt.Sprint(p)
			}
			s = strings.Join(parts, ",")
		default:
			s = fmt.Sprint(x)
		}
		if err := fs.Set(k, s); err != nil {
			return fmt.Errorf("--config %s: %s: %q: %v", file, k, s, err)
		}
	}
	return nil
}
