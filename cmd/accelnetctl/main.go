// Command accelnetctl is the command-line client of accelnet's REST API:
// tenants submit and follow bandwidth intents; operators also manage
// tenants and tokens.
//
//	accelnetctl config set-context demo --server http://localhost:8080 --token anet_… --use
//	accelnetctl intents create --name job1 --src h1-1 --dst h2-1 --gbps 100 --ports 49152-49155
//	accelnetctl intents list
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/models"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		os.Exit(1)
	}
}

// globals are the flags every command takes.
type globals struct {
	server, token, context, output string
}

// client resolves the server and token: flags, then ACCELNET_SERVER and
// ACCELNET_TOKEN, then the config file's current (or named) context.
func (g *globals) client() (*client, error) {
	f, _, err := loadFile()
	if err != nil {
		return nil, err
	}
	name := g.context
	if name == "" {
		name = f.Current
	}
	ctx := f.Contexts[name]
	if g.context != "" && ctx.Server == "" {
		return nil, fmt.Errorf("no context %q in the config file", g.context)
	}
	c := &client{Client: apiclient.Client{Token: g.token, HTTP: newHTTPClient()}}
	c.Unreachable = c.unreachable
	if c.Token == "" {
		c.Token = os.Getenv("ACCELNET_TOKEN")
	}
	if c.Token == "" {
		c.Token = ctx.Token
	}
	path, _ := configPath()
	switch {
	case g.server != "":
		c.Server, c.from = g.server, "--server"
	case os.Getenv("ACCELNET_SERVER") != "":
		c.Server, c.from = os.Getenv("ACCELNET_SERVER"), "ACCELNET_SERVER"
	case ctx.Server != "":
		c.Server, c.from = ctx.Server, fmt.Sprintf("context %q of %s", name, path)
	default:
		c.Server, c.from = "http://localhost:8080", "the default: no --server, ACCELNET_SERVER or context"
	}
	return c, nil
}

func (g *globals) json() bool { return g.output == "json" }

// call resolves the client and sends one request (see client.do).
func (g *globals) call(cmd *cobra.Command, method, path string, body, out any, headers ...string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	_, err = c.do(cmd.Context(), method, path, body, out, headers...)
	return err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "accelnetctl",
		Short:         "Client for accelnet's REST API: intents, capacity, topology, tenants, tokens, drains, elephants and switches' entries",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.PersistentFlags().StringVar(&g.server, "server", "", "API base URL (default: the context's, $ACCELNET_SERVER, or http://localhost:8080)")
	root.PersistentFlags().StringVar(&g.token, "token", "", "bearer token (default: the context's or $ACCELNET_TOKEN)")
	root.PersistentFlags().StringVar(&g.context, "context", "", "config-file context to use instead of the current one")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "table or json")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if g.output != "table" && g.output != "json" {
			return fmt.Errorf("-o %q: want table or json", g.output)
		}
		return nil
	}
	root.AddCommand(configCommand(), intentsCommand(g), capacityCommand(g), topologyCommand(g),
		tenantsCommand(g), tokensCommand(g), drainsCommand(g), elephantsCommand(g), switchesCommand(g), whoamiCommand(g))
	return root
}

func configCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Manage the contexts in the config file ($ACCELNET_CONFIG)"}
	var server, token string
	var use bool
	set := &cobra.Command{
		Use:     "set-context NAME",
		Example: `  accelnetctl config set-context ops --server http://localhost:8080 --token "$(cat accelnet-data/operator.token)" --use`,
		Short:   "Create or change a context",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, path, err := loadFile()
			if err != nil {
				return err
			}
			c := f.Contexts[args[0]]
			if server != "" {
				if _, err := url.ParseRequestURI(server); err != nil {
					return fmt.Errorf("--server %q: %v", server, err)
				}
				c.Server = server
			}
			if token != "" {
				c.Token = token
			}
			f.Contexts[args[0]] = c
			if use || f.Current == "" {
				f.Current = args[0]
			}
			if err := saveFile(f, path); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %s saved in %s\n", args[0], path)
			return nil
		},
	}
	set.Flags().StringVar(&server, "server", "", "API base URL")
	set.Flags().StringVar(&token, "token", "", "bearer token")
	set.Flags().BoolVar(&use, "use", false, "make it the current context")
	useCmd := &cobra.Command{
		Use:     "use-context NAME",
		Example: `  accelnetctl config use-context vision`,
		Short:   "Switch the current context",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, path, err := loadFile()
			if err != nil {
				return err
			}
			if _, ok := f.Contexts[args[0]]; !ok {
				return fmt.Errorf("no context %q", args[0])
			}
			f.Current = args[0]
			return saveFile(f, path)
		},
	}
	view := &cobra.Command{
		Use:     "view",
		Example: `  accelnetctl config view`,
		Short:   "Show the contexts (tokens shortened)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, _, err := loadFile()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CURRENT\tNAME\tSERVER\tTOKEN")
			names := make([]string, 0, len(f.Contexts))
			for n := range f.Contexts {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				c := f.Contexts[n]
				mark := ""
				if n == f.Current {
					mark = "*"
				}
				tok := c.Token
				if len(tok) > 9 {
					tok = tok[:9] + "…"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", mark, n, c.Server, tok)
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(set, useCmd, view)
	return cmd
}

// parsePorts reads "49152" or "49152-49155".
func parsePorts(s string) (models.PortRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	first, err := strconv.ParseUint(strings.TrimSpace(a), 10, 16)
	if err != nil {
		return models.PortRange{}, fmt.Errorf("--ports %q: want PORT or FIRST-LAST", s)
	}
	last := first
	if isRange {
		if last, err = strconv.ParseUint(strings.TrimSpace(b), 10, 16); err != nil {
			return models.PortRange{}, fmt.Errorf("--ports %q: want PORT or FIRST-LAST", s)
		}
	}
	return models.PortRange{First: uint16(first), Last: uint16(last)}, nil
}

func intentsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "intents", Aliases: []string{"intent"}, Short: "Create, list, inspect, delete and watch bandwidth intents"}
	cmd.AddCommand(intentsCreateCommand(g), intentsCreateManyCommand(g), intentsListCommand(g), intentsGetCommand(g), intentsDeleteCommand(g), intentsWatchCommand(g))
	return cmd
}

func intentsCreateCommand(g *globals) *cobra.Command {
	var o createFlags
	create := &cobra.Command{
		Use:   "create",
		Short: "Ask for bandwidth between two hosts (or for a collective among GPUs)",
		Args:  cobra.NoArgs,
		Example: `  accelnetctl intents create --name resnet --src h1-1 --dst h5-1 --gbps 300 --ports 49152-49153 --dry-run
  accelnetctl intents create --name resnet --src h1-1 --dst h5-1 --gbps 300 --ports 49152-49153
  accelnetctl intents create --name ring --collective ring-allreduce --endpoints h1-1,h2-1,h3-1 --gbps-per-gpu 100 --ports 60000
  accelnetctl intents create --name job-7 --collective ring-allreduce --endpoints h1-1,h2-1,h3-1 --gbps-per-gpu 100 --sampled
  accelnetctl intents create -f intent.json`,
		PreRunE: func(*cobra.Command, []string) error { return o.check() },
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := o.request()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			path := "/api/v1/intents"
			if o.dryRun {
				var dry api.DryRunView
				if _, err := c.do(cmd.Context(), "POST", path+"?dryRun=true", req, &dry); err != nil {
					return err
				}
				if g.json() {
					return printJSON(cmd.OutOrStdout(), dry)
				}
				printDryRun(cmd.OutOrStdout(), dry)
				return nil
			}
			var in models.Intent
			if _, err := c.do(cmd.Context(), "POST", path, req, &in, "Idempotency-Key", o.idemKey); err != nil {
				return err
			}
			return printIntents(cmd.OutOrStdout(), g, []models.Intent{in}, in)
		},
	}
	f := create.Flags()
	req := &o.req
	f.StringVar(&req.Name, "name", "", "intent name")
	f.StringVar((*string)(&req.Tenant), "tenant", "", "tenant (operators only; a tenant token implies its own)")
	f.StringVar(&req.Src, "src", "", "source host name or IP")
	f.StringVar(&req.Dst, "dst", "", "destination host name or IP")
	f.Float64Var(&req.Gbps, "gbps", 0, "bandwidth in Gb/s, split evenly over the ports")
	f.StringVar(&o.ports, "ports", "", "UDP source ports of the flows (one per QP): PORT or FIRST-LAST")
	f.BoolVar(&req.SampledFlows, "sampled", false, "instead of --ports: reserve for the RoCEv2 flows sampling finds between the hosts (their NICs choose the ports)")
	f.IntVar(&req.Priority, "priority", 0, "0 (lowest) to 7")
	f.StringVar((*string)(&req.Class), "class", "", "lossless-rdma (default) or best-effort")
	f.IntVar(&req.Constraints.MaxHops, "max-hops", 0, "most switches on a path (0: any)")
	f.StringVar(&req.Constraints.DisjointFrom, "disjoint-from", "", "ID of your intent whose links this one must avoid")
	f.StringVar(&o.pattern, "collective", "", "ring-allreduce or all-to-all (with --endpoints and --gbps-per-gpu)")
	f.StringSliceVar(&o.endpoints, "endpoints", nil, "GPU hosts of a collective, in ring order")
	f.Float64Var(&o.gbpsPerGPU, "gbps-per-gpu", 0, "a collective's rate per GPU")
	f.StringVarP(&o.file, "file", "f", "", "read the intent as JSON from a file (- for stdin) instead of flags")
	f.StringVar(&o.idemKey, "idempotency-key", "", "retry-safe key: the same key returns the first result")
	f.BoolVar(&o.dryRun, "dry-run", false, "only say whether it would fit, where, and what the max link utilization would become")
	f.StringSliceVar(&o.avoid, "avoid", nil, "switches to keep off the paths")
	return create
}

func intentsCreateManyCommand(g *globals) *cobra.Command {
	var file, idemKey string
	var req api.IntentBatchRequest
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "create-many -f FILE",
		Short: "Ask for up to 1,000 intents in one request: each on its own, or all or none (--atomic)",
		Args:  cobra.NoArgs,
		Example: `  accelnetctl intents create-many -f job-flows.json --atomic --idempotency-key job-7
  accelnetctl intents create-many -f wave.json --dry-run
  (FILE: a JSON array of intents as intents create -f takes them, or {"items": [...]}; - for stdin)`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("missing -f FILE (a JSON array of intents); see accelnetctl intents create-many --help")
			}
			data, err := readFileOrStdin(file)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &req.Items); err != nil {
				var whole api.IntentBatchRequest
				if err2 := json.Unmarshal(data, &whole); err2 != nil || whole.Items == nil {
					return fmt.Errorf("%s: want a JSON array of intents or {\"items\": [...]}: %w", file, err)
				}
				req.Items = whole.Items
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			path := "/api/v1/intents:batch"
			if dryRun {
				path += "?dryRun=true"
			}
			var out api.IntentBatchResult
			if _, err := c.do(cmd.Context(), "POST", path, req, &out, "Idempotency-Key", idemKey); err != nil {
				return err
			}
			if g.json() {
				if err := printJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			} else if err := printBatch(cmd.OutOrStdout(), out); err != nil {
				return err
			}
			if out.Failed > 0 {
				return fmt.Errorf("%d of %d intents not created", out.Failed, len(out.Items))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "the intents as JSON (- for stdin)")
	f.StringVar((*string)(&req.Tenant), "tenant", "", "tenant (operators only; a tenant token implies its own)")
	f.BoolVar(&req.Atomic, "atomic", false, "all or none, their flows placed together (point-to-point intents without constraints)")
	f.StringVar(&idemKey, "idempotency-key", "", "retry-safe key for the whole request: a retry returns what the first made")
	f.BoolVar(&dryRun, "dry-run", false, "decide them in order as they would be now, and keep nothing")
	return cmd
}

// printBatch lists a batch's results, one line per item.
func printBatch(out io.Writer, r api.IntentBatchResult) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ITEM\tSTATUS\tID\tNAME\tSTATE\tREASON")
	for i, it := range r.Items {
		switch {
		case it.Intent != nil:
			fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\n", i, it.Status, it.Intent.ID, it.Intent.Spec.Name, it.Intent.Status.State, it.Intent.Status.Reason)
		case it.Problem != nil:
			fmt.Fprintf(w, "%d\t%d\t\t\t\t%s\n", i, it.Status, it.Problem.Detail)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	what := "created"
	if r.DryRun {
		what = "would be created (dry run: nothing kept)"
	}
	_, err := fmt.Fprintf(out, "\n%d of %d %s\n", r.Created, len(r.Items), what)
	return err
}

// createFlags are intents create's flags.
type createFlags struct {
	req                           api.IntentRequest
	ports, file, idemKey, pattern string
	endpoints, avoid              []string
	gbpsPerGPU                    float64
	dryRun                        bool
}

// check says, before any request, what the flags are missing.
func (o *createFlags) check() error {
	if o.file != "" {
		return nil
	}
	var missing []string
	need := func(flag string, ok bool) {
		if !ok {
			missing = append(missing, "--"+flag)
		}
	}
	need("name", o.req.Name != "")
	if o.req.SampledFlows && o.ports != "" {
		return errors.New("give --ports or --sampled, not both")
	}
	need("ports (or --sampled)", o.ports != "" || o.req.SampledFlows)
	if o.pattern == "" {
		need("src", o.req.Src != "")
		need("dst", o.req.Dst != "")
		need("gbps", o.req.Gbps > 0)
	} else {
		need("endpoints", len(o.endpoints) >= 2)
		need("gbps-per-gpu", o.gbpsPerGPU > 0)
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (or give the whole intent with -f FILE); see accelnetctl intents create --help", strings.Join(missing, ", "))
	}
	return nil
}

// request is the intent the flags ask for: the file's, or the flags'.
func (o *createFlags) request() (api.IntentRequest, error) {
	if o.file != "" {
		data, err := readFileOrStdin(o.file)
		if err != nil {
			return api.IntentRequest{}, err
		}
		var req api.IntentRequest
		if err := json.Unmarshal(data, &req); err != nil {
			return api.IntentRequest{}, fmt.Errorf("%s: %w", o.file, err)
		}
		return req, nil
	}
	req := o.req
	for _, s := range o.avoid {
		req.Constraints.AvoidSwitches = append(req.Constraints.AvoidSwitches, models.SwitchID(s))
	}
	if o.ports != "" {
		pr, err := parsePorts(o.ports)
		if err != nil {
			return api.IntentRequest{}, err
		}
		req.SrcPorts = pr
	}
	if o.pattern != "" {
		req.Collective = &models.Collective{Pattern: o.pattern, Endpoints: o.endpoints, GbpsPerGPU: o.gbpsPerGPU}
	}
	return req, nil
}

// printDryRun says what a dry run of an intent found.
func printDryRun(w io.Writer, dry api.DryRunView) {
	fmt.Fprintf(w, "fits: %v\nmax reserved link utilization: %.2f\n", dry.Fits, dry.MLU)
	if dry.Bottleneck != "" {
		fmt.Fprintf(w, "bottleneck: %s (%.1f Gb/s free)\n", dry.Bottleneck, dry.FreeGbps)
	}
	if dry.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", dry.Reason)
	}
	if dry.Hint != "" {
		fmt.Fprintf(w, "queue pairs: %s\n", dry.Hint)
	}
	for i, p := range dry.Paths {
		fmt.Fprintf(w, "flow %d: %s\n", i, pathString(p))
	}
	if len(dry.Preempts) > 0 {
		fmt.Fprintf(w, "would preempt: %s\n", strings.Join(dry.Preempts, ", "))
	}
}

func intentsListCommand(g *globals) *cobra.Command {
	var state, tenant string
	list := &cobra.Command{
		Use: "list",
		Example: `  accelnetctl intents list --state Installed
  accelnetctl --context ops intents list --tenant vision -o json`,
		Short: "List intents (every page)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			all, err := listIntents(cmd.Context(), c, state, tenant)
			if err != nil {
				return err
			}
			return printIntents(cmd.OutOrStdout(), g, all, nil)
		},
	}
	list.Flags().StringVar(&state, "state", "", "only intents in this state")
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's (operators)")
	return list
}

func intentsGetCommand(g *globals) *cobra.Command {
	get := &cobra.Command{
		Use:     "get ID",
		Example: `  accelnetctl intents get 1a22c2066bfd8e8bd5d -o json`,
		Short:   "Show one intent with its flows and recent events",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in models.Intent
			if err := g.call(cmd, "GET", "/api/v1/intents/"+url.PathEscape(args[0]), nil, &in); err != nil {
				return err
			}
			return printIntents(cmd.OutOrStdout(), g, []models.Intent{in}, in)
		},
	}
	return get
}

func intentsDeleteCommand(g *globals) *cobra.Command {
	var delName string
	var missingOK bool
	del := &cobra.Command{
		Use: "delete ID…",
		Example: `  accelnetctl intents delete 1a22c2066bfd8e8bd5d 1a22c20580a9f9f6ff0
  accelnetctl intents delete --name slurm-4711 --missing-ok`,
		Short: "Delete intents (their entries are removed from the switches)",
		Args: func(cmd *cobra.Command, args []string) error {
			if (delName == "") == (len(args) == 0) {
				return errors.New("give intent IDs or --name, not both")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if delName != "" {
				all, err := listIntents(cmd.Context(), c, "", "")
				if err != nil {
					return err
				}
				for _, in := range all {
					if in.Spec.Name == delName && in.Status.State != models.StateDeleted {
						args = append(args, in.ID)
					}
				}
				if len(args) == 0 {
					if missingOK {
						fmt.Fprintf(cmd.OutOrStdout(), "no intent named %q\n", delName)
						return nil
					}
					return fmt.Errorf("no intent named %q (--missing-ok says so and succeeds)", delName)
				}
			}
			var errs []error
			for _, id := range args {
				var in models.Intent
				if _, err := c.do(cmd.Context(), "DELETE", "/api/v1/intents/"+url.PathEscape(id), nil, &in); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", id, err))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %s\n", in.ID, in.Status.State, in.Status.Reason)
			}
			return errors.Join(errs...)
		},
	}
	del.Flags().StringVar(&delName, "name", "", "delete the intents of this name (that the token sees) instead of naming IDs")
	del.Flags().BoolVar(&missingOK, "missing-ok", false, "with --name: succeed when no intent has the name (an epilog whose prolog did not reserve)")
	return del
}

func intentsWatchCommand(g *globals) *cobra.Command {
	watch := &cobra.Command{
		Use:     "watch",
		Example: `  accelnetctl intents watch`,
		Short:   "Show every intent as it stands, then follow changes as they happen (Ctrl-C stops)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return c.stream(cmd.Context(), "/api/v1/events", func(event, data string) error {
				if g.json() {
					_, err := fmt.Fprintln(out, data)
					return err
				}
				var ev api.Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return err
				}
				now := time.Now().Format("15:04:05")
				switch {
				case ev.Intent != nil:
					fmt.Fprintf(out, "%s  %s/%s  %-9s %s\n", now, ev.Intent.Tenant, ev.Intent.ID, ev.Intent.Status.State, ev.Intent.Status.Reason)
				case ev.Type == "intent-removed":
					fmt.Fprintf(out, "%s  %s/%s  removed\n", now, ev.Tenant, ev.ID)
				case ev.Type == "switch-foreign":
					fmt.Fprintf(out, "%s  switch %s: another controller holds it (%s)\n", now, ev.Switch, ev.Message)
				case ev.Type == "switch-primary":
					fmt.Fprintf(out, "%s  switch %s: accelnet holds it again\n", now, ev.Switch)
				case ev.Type == "synced":
					fmt.Fprintf(out, "%s  %d intents as they stand; changes follow (Ctrl-C stops)\n", now, ev.Count)
				default:
					fmt.Fprintf(out, "%s  %s (revision %d)\n", now, ev.Type, ev.Revision)
				}
				return nil
			})
		},
	}
	return watch
}

func readFileOrStdin(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

func pathString(p []models.Endpoint) string {
	parts := make([]string, len(p))
	for i, e := range p {
		parts[i] = e.String()
	}
	return strings.Join(parts, " → ")
}

// printIntents prints a table, or with detail set one intent in full.
func printIntents(out io.Writer, g *globals, items []models.Intent, detail any) error {
	if g.json() {
		if detail != nil {
			return printJSON(out, detail)
		}
		if items == nil {
			items = []models.Intent{}
		}
		return printJSON(out, items)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTENANT\tNAME\tSTATE\tGBPS\tFLOWS\tREASON")
	for _, in := range items {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%g\t%d\t%s\n", in.ID, in.Tenant, in.Spec.Name, in.Status.State, in.Spec.TotalGbps(), len(in.Status.Flows), in.Status.Reason)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if in, ok := detail.(models.Intent); ok {
		fmt.Fprintf(out, "\nrevision %d, created %s\n", in.Revision, in.Created.Format(time.RFC3339))
		for _, f := range in.Status.Flows {
			port := strconv.Itoa(int(f.SrcPort))
			if in.Spec.SampledFlows {
				port = "*" // the flows sampling finds between the pair
			}
			fmt.Fprintf(out, "  %s:%s → %s  %g Gb/s  %s\n", f.Src, port, f.Dst, f.Gbps, pathString(f.Path))
		}
		for _, ev := range in.Status.Events {
			fmt.Fprintf(out, "  %s  %-9s %s\n", ev.Time.Format("15:04:05.000"), ev.State, ev.Reason)
		}
	}
	return nil
}

func capacityCommand(g *globals) *cobra.Command {
	var src, dst string
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Bandwidth one more flow between two hosts could reserve now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cap api.Capacity
			q := url.Values{"src": {src}, "dst": {dst}}
			if err := g.call(cmd, "GET", "/api/v1/capacity?"+q.Encode(), nil, &cap); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), cap)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s → %s: %.1f Gb/s reservable (bottleneck %s; %.0f%% headroom kept)\n",
				cap.Src, cap.Dst, cap.AvailableGbps, cap.Bottleneck, 100*cap.Headroom)
			return nil
		},
	}
	cmd.Flags().StringVar(&src, "src", "", "source host name or IP (required)")
	cmd.Flags().StringVar(&dst, "dst", "", "destination host name or IP (required)")
	_ = cmd.MarkFlagRequired("src")
	_ = cmd.MarkFlagRequired("dst")
	cmd.Example = "  accelnetctl capacity --src h1-1 --dst h5-1"
	return cmd
}

func topologyCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "topology",
		Example: `  accelnetctl topology
  accelnetctl topology -o json | jq '.links[] | select(.load.utilization > 0.9) | .id'`,
		Short: "Switches and links with their current load",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v api.TopologyView
			if err := g.call(cmd, "GET", "/api/v1/topology", nil, &v); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), v)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: %d switches, %d links, %d hosts (revision %d)\n\n", v.Name, len(v.Switches), len(v.Links), len(v.Hosts), v.Revision)
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SWITCH\tROLE\tIN SYNC\tENTRIES")
			for _, s := range v.Switches {
				sync, n := "-", 0
				if s.Status != nil {
					sync, n = strconv.FormatBool(s.Status.InSync), s.Status.Entries
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", s.Name, s.Role, sync, n)
			}
			fmt.Fprintln(w, "\nLINK\tGBPS\tUTILIZATION\tSTATE")
			for _, l := range v.Links {
				state := "up"
				switch {
				case l.Load.Measured && !l.Load.Up:
					state = "DOWN"
				case l.Load.Stale:
					state = "stale"
				}
				fmt.Fprintf(w, "%s\t%g\t%.0f%%\t%s\n", l.ID, l.Gbps, 100*l.Load.Utilization, state)
			}
			return w.Flush()
		},
	}
}

func tenantsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tenants", Short: "Manage tenants and their quotas (operators)"}
	var maxGbps float64
	var maxIntents int
	var hosts, holds []string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant or replace its quotas and hosts",
		Example: `  accelnetctl tenants create vision --max-gbps 800 --max-intents 20
  accelnetctl tenants create rack1 --holds 'h1-*' --hosts 'h5-*'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t api.TenantView
			if err := g.call(cmd, "POST", "/api/v1/tenants", models.Tenant{Name: models.TenantName(args[0]), MaxGbps: maxGbps, MaxIntents: maxIntents, Hosts: hosts, Holds: holds}, &t); err != nil {
				return err
			}
			return printTenants(cmd.OutOrStdout(), g, []api.TenantView{t})
		},
	}
	create.Flags().Float64Var(&maxGbps, "max-gbps", 0, "most bandwidth its live intents may reserve (0: no cap)")
	create.Flags().IntVar(&maxIntents, "max-intents", 0, "most live intents (0: no cap)")
	create.Flags().StringSliceVar(&hosts, "hosts", nil, "hosts it may reserve between, besides those it holds: names or patterns (default: any host nobody holds)")
	create.Flags().StringSliceVar(&holds, "holds", nil, "hosts it holds alone: no other tenant may reserve to or from them")
	list := &cobra.Command{
		Use:     "list",
		Example: `  accelnetctl tenants list`,
		Short:   "List tenants with what they reserve",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page struct {
				Items []api.TenantView `json:"items"`
			}
			if err := g.call(cmd, "GET", "/api/v1/tenants", nil, &page); err != nil {
				return err
			}
			return printTenants(cmd.OutOrStdout(), g, page.Items)
		},
	}
	get := &cobra.Command{
		Use:     "get NAME",
		Short:   "One tenant with what it reserves",
		Example: "  accelnetctl tenants get vision",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t api.TenantView
			if err := g.call(cmd, "GET", "/api/v1/tenants/"+url.PathEscape(args[0]), nil, &t); err != nil {
				return err
			}
			return printTenants(cmd.OutOrStdout(), g, []api.TenantView{t})
		},
	}
	del := &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a tenant: its tokens are revoked and its intents deleted",
		Example: "  accelnetctl tenants delete vision",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, "DELETE", "/api/v1/tenants/"+url.PathEscape(args[0]), nil, nil)
		},
	}
	cmd.AddCommand(create, list, get, del)
	return cmd
}

func printTenants(out io.Writer, g *globals, ts []api.TenantView) error {
	if g.json() {
		if ts == nil {
			ts = []api.TenantView{}
		}
		return printJSON(out, ts)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tRESERVED GBPS\tMAX GBPS\tLIVE INTENTS\tMAX INTENTS")
	for _, t := range ts {
		fmt.Fprintf(w, "%s\t%g\t%g\t%d\t%d\n", t.Name, t.ReservedGbps, t.MaxGbps, t.LiveIntents, t.MaxIntents)
	}
	return w.Flush()
}

func tokensCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tokens", Short: "Issue, list and revoke API tokens (operators)"}
	var tenant, role string
	create := &cobra.Command{
		Use:   "create",
		Short: "Issue a token; its secret is printed once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var tok api.NewTokenView
			if err := g.call(cmd, "POST", "/api/v1/tokens", api.TokenRequest{Tenant: models.TenantName(tenant), Role: models.TokenRole(role)}, &tok); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), tok)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s (%s %s):\n%s\n", tok.ID, tok.Role, tok.Tenant, tok.Secret)
			return nil
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant it acts for (required with --role tenant)")
	create.Flags().StringVar(&role, "role", "tenant", "tenant or operator")
	create.Example = `  accelnetctl tokens create --tenant vision
  accelnetctl tokens create --role operator`
	create.PreRunE = func(*cobra.Command, []string) error {
		switch {
		case role != string(models.RoleTenant) && role != string(models.RoleOperator):
			return fmt.Errorf("--role %q: want tenant or operator", role)
		case role == string(models.RoleTenant) && tenant == "":
			return fmt.Errorf("a tenant token needs --tenant NAME (or --role operator)")
		case role == string(models.RoleOperator) && tenant != "":
			return fmt.Errorf("an operator token acts for every tenant: drop --tenant")
		}
		return nil
	}
	list := &cobra.Command{
		Use:     "list",
		Example: `  accelnetctl tokens list`,
		Short:   "List tokens (never their secrets)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page struct {
				Items []models.Token `json:"items"`
			}
			if err := g.call(cmd, "GET", "/api/v1/tokens", nil, &page); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), page.Items)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tROLE\tTENANT\tCREATED")
			for _, t := range page.Items {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.ID, t.Role, t.Tenant, t.Created.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	del := &cobra.Command{
		Use:     "delete ID",
		Example: `  accelnetctl tokens delete 3f2a9c0d1e4b5a67`,
		Short:   "Revoke a token",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd, "DELETE", "/api/v1/tokens/"+url.PathEscape(args[0]), nil, nil)
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

func drainsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "drains", Short: "Take switches and links out of service for maintenance (operators)"}
	cmd.AddCommand(drainsCreateCommand(g), drainsListCommand(g), drainsGetCommand(g), drainsDeleteCommand(g))
	return cmd
}

func drainsCreateCommand(g *globals) *cobra.Command {
	var d models.Drain
	var dryRun bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Drain a switch (--switch) or a link (--link); --dry-run says what it would do",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if dryRun {
				var p api.DrainPreview
				if err := g.call(cmd, "POST", "/api/v1/drains?dryRun=true", d, &p); err != nil {
					return err
				}
				if g.json() {
					return printJSON(out, p)
				}
				fmt.Fprintf(out, "links drained: %d\ntraffic on them now: %.1f Gb/s\nreserved utilization after: %.2f\nintents moved: %d\n",
					p.Links, p.TrafficGbps, p.ReservedMLU, p.Moved)
				if len(p.Degraded) > 0 {
					fmt.Fprintf(out, "intents that would degrade: %s\n", strings.Join(p.Degraded, ", "))
				}
				if len(p.HostsCutOff) > 0 {
					fmt.Fprintf(out, "hosts cut off: %s\n", strings.Join(p.HostsCutOff, ", "))
				}
				return nil
			}
			var v api.DrainView
			if err := g.call(cmd, "POST", "/api/v1/drains", d, &v); err != nil {
				return err
			}
			return printDrains(out, g, []api.DrainView{v})
		},
	}
	f := create.Flags()
	f.StringVar((*string)(&d.Switch), "switch", "", "switch to drain")
	f.StringVar((*string)(&d.Link), "link", "", "link to drain, as switch:port<->switch:port")
	f.StringVar(&d.Reason, "reason", "", "why (shown with the drain)")
	f.BoolVar(&d.Force, "force", false, "drain even if it cuts hosts off")
	f.BoolVar(&dryRun, "dry-run", false, "only say what the drain would do")
	create.Example = `  accelnetctl drains create --switch spine3 --reason "optics swap" --dry-run
  accelnetctl drains create --switch spine3 --reason "optics swap"
  accelnetctl drains create --link 'leaf1:3<->spine1:1'`
	create.PreRunE = func(*cobra.Command, []string) error {
		if (d.Switch == "") == (d.Link == "") {
			return fmt.Errorf("name a switch (--switch) or a link (--link) to drain, one of them")
		}
		return nil
	}
	return create
}

func drainsListCommand(g *globals) *cobra.Command {
	list := &cobra.Command{
		Use:     "list",
		Example: `  accelnetctl drains list`,
		Short:   "Drains and whether traffic is off them yet",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var page struct {
				Items []api.DrainView `json:"items"`
			}
			if err := g.call(cmd, "GET", "/api/v1/drains", nil, &page); err != nil {
				return err
			}
			return printDrains(cmd.OutOrStdout(), g, page.Items)
		},
	}
	return list
}

func drainsGetCommand(g *globals) *cobra.Command {
	get := &cobra.Command{
		Use:     "get ID",
		Short:   "One drain and whether traffic is off it yet",
		Example: "  accelnetctl drains get 1a2b3c4d5e6f",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v api.DrainView
			if err := g.call(cmd, "GET", "/api/v1/drains/"+url.PathEscape(args[0]), nil, &v); err != nil {
				return err
			}
			return printDrains(cmd.OutOrStdout(), g, []api.DrainView{v})
		},
	}
	return get
}

func drainsDeleteCommand(g *globals) *cobra.Command {
	del := &cobra.Command{
		Use:     "delete ID",
		Example: `  accelnetctl drains delete 1a2b3c4d5e6f`,
		Short:   "Undrain: traffic may return",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v api.DrainView
			if err := g.call(cmd, "GET", "/api/v1/drains/"+url.PathEscape(args[0]), nil, &v); err != nil {
				return err
			}
			if err := g.call(cmd, "DELETE", "/api/v1/drains/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			what := "switch " + string(v.Switch)
			if v.Link != "" {
				what = "link " + string(v.Link)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "drain %s deleted: %s may carry traffic again\n", v.ID, what)
			return nil
		},
	}
	return del
}

func printDrains(out io.Writer, g *globals, ds []api.DrainView) error {
	if g.json() {
		if ds == nil {
			ds = []api.DrainView{}
		}
		return printJSON(out, ds)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSWITCH\tLINK\tSTATE\tTRAFFIC GBPS\tREASON")
	for _, d := range ds {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.1f\t%s\n", d.ID, d.Switch, d.Link, d.State, d.TrafficGbps, d.Reason)
	}
	return w.Flush()
}

func whoamiCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "whoami",
		Example: `  accelnetctl whoami`,
		Short:   "Show the token in use (role and tenant)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var t models.Token
			if err := g.call(cmd, "GET", "/api/v1/whoami", nil, &t); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s: %s %s\n", t.ID, t.Role, t.Tenant)
			return nil
		},
	}
}

// listIntents reads every page of the intents the token sees (of state
// and tenant, when given).
func listIntents(ctx context.Context, c *client, state, tenant string) ([]models.Intent, error) {
	var all []models.Intent
	token := ""
	for {
		q := url.Values{"limit": {"1000"}}
		for k, v := range map[string]string{"state": state, "tenant": tenant, "page_token": token} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var page api.IntentList
		if _, err := c.do(ctx, "GET", "/api/v1/intents?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if token = page.NextPageToken; token == "" {
			return all, nil
		}
	}
}
