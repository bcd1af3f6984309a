package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/models"
)

// Config is what Run needs.
type Config struct {
	// Accelnet is the client of accelnet's API (the topology is public:
	// no token is needed for it).
	Accelnet *apiclient.Client
	// Kube is the Kubernetes API's client configuration.
	Kube *rest.Config
	// Topology names the Kueue Topology ("" for none); Taint puts a
	// NoSchedule taint on nodes whose fabric link is degraded.
	Topology string
	Taint    bool
	// Resync is how often everything is published again even if nothing
	// was seen to change (objects edited by others are put back).
	Resync time.Duration
	// Lease: only the holder of this Lease acts. Identity names this
	// process in it (default: the host name and the process ID).
	LeaseNamespace, LeaseName, Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's
	// leader election (defaults 15 s, 10 s, 2 s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       *slog.Logger

	// Tenants maps namespaces to accelnet tenants ("*": every other
	// namespace); jobs are reserved for only while it is not empty, and
	// the Accelnet client's token may create intents for these tenants
	// (an operator token, or the one tenant's own).
	Tenants map[string]models.TenantName
	// GroupBy says how pods are grouped into jobs: label keys (the group
	// is the value) or "owner", the first that applies (DefaultGroupBy).
	GroupBy []string
	// RetryRefused is how long a refused job waits before asking again
	// (default 30 s); Workers how many groups are looked at at once
	// (default 4).
	RetryRefused time.Duration
	Workers      int
	// Reserved, if set, hears each look at a group (metrics, tests).
	Reserved func(Reserved, error)

	// Published, if set, hears each publish's outcome (metrics, tests).
	Published func(Published, error)
	// Leading, if set, hears when this process starts and stops leading.
	Leading func(bool)
}

func (c *Config) defaults() error {
	if c.Accelnet == nil || c.Kube == nil {
		return errors.New("kube: the accelnet and the Kubernetes clients are required")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Resync <= 0 {
		c.Resync = time.Minute
	}
	if c.LeaseName == "" {
		c.LeaseName = "accelnet-kube"
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = "default"
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline <= 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod <= 0 {
		c.RetryPeriod = 2 * time.Second
	}
	if len(c.GroupBy) == 0 {
		c.GroupBy = DefaultGroupBy
	}
	if c.RetryRefused <= 0 {
		c.RetryRefused = 30 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	return nil
}

// Run publishes the fabric to Kubernetes while it holds the Lease, until
// ctx ends (nil) or the Lease is lost (an error: the process should exit
// and start again, as a Deployment does).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	core, err := corev1client.NewForConfig(cfg.Kube)
	if err != nil {
		return err
	}
	coord, err := coordinationv1client.NewForConfig(cfg.Kube)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg.Kube)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName},
		Client:     coord,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	// client-go calls OnStartedLeading in a goroutine it does not wait
	// for: the work runs in one of Run's own, which Run waits for.
	leads := make(chan context.Context, 1)
	lost := false
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leads <- ctx },
			OnStoppedLeading: func() {
				if cfg.Leading != nil {
					cfg.Leading(false)
				}
				if ctx.Err() == nil {
					lost = true
				}
			},
		},
	})
	if err != nil {
		return err
	}
	var loopErr error
	runDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case lctx := <-leads:
			cfg.Log.Info("leading: publishing the fabric", "lease", cfg.LeaseNamespace+"/"+cfg.LeaseName, "identity", cfg.Identity)
			if cfg.Leading != nil {
				cfg.Leading(true)
			}
			loopErr = lead(lctx, cfg, core, dyn)
		case <-runDone:
		}
	})
	le.Run(ctx)
	close(runDone)
	wg.Wait()
	switch {
	case loopErr != nil:
		return loopErr
	case lost:
		return fmt.Errorf("lost the lease %s/%s", cfg.LeaseNamespace, cfg.LeaseName)
	}
	return nil
}

// lead publishes while leading: after every change of the fabric's shape
// or of a node, and every Resync.
func lead(ctx context.Context, cfg Config, core corev1client.CoreV1Interface, dyn dynamic.Interface) error {
	signal := make(chan struct{}, 1)
	poke := func() {
		select {
		case signal <- struct{}{}:
		default:
		}
	}
	var mu sync.Mutex
	var shape *Shape
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		FollowFabric(ctx, cfg.Accelnet, cfg.Log, func(s Shape) {
			mu.Lock()
			shape = &s
			mu.Unlock()
			poke()
		})
	})

	informer := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(core.RESTClient(), "nodes", metav1.NamespaceAll, fields.Everything()),
		&corev1.Node{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		DeleteFunc: func(any) { poke() },
		UpdateFunc: func(before, after any) {
			if nodeMatters(before, after) {
				poke()
			}
		},
	}); err != nil {
		return err
	}
	wg.Go(func() { informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // ctx ended
	}

	var jb *jobs
	if len(cfg.Tenants) > 0 {
		jb = newJobs(cfg, core)
		wg.Go(func() { jb.run(ctx) })
	}

	pub := &Publisher{Core: core, Dynamic: dyn, Topology: cfg.Topology, Taint: cfg.Taint, Log: cfg.Log, Component: cfg.Identity}
	resync := time.NewTicker(cfg.Resync)
	defer resync.Stop()
	failures := 0
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-signal:
		case <-resync.C:
		case <-retry:
		}
		retry = nil
		mu.Lock()
		s := shape
		mu.Unlock()
		if s == nil {
			continue // nothing heard of the fabric yet
		}
		var nodes []*corev1.Node
		for _, o := range informer.GetStore().List() {
			nodes = append(nodes, o.(*corev1.Node))
		}
		res, err := pub.Publish(ctx, *s, nodes)
		if ctx.Err() != nil {
			return nil
		}
		if jb != nil {
			jb.setPlaces(res.places)
		}
		if cfg.Published != nil {
			cfg.Published(res, err)
		}
		if err != nil {
			wait := backoff(failures)
			failures++
			cfg.Log.Warn("publishing the fabric: trying again", "err", err, "in", wait)
			retry = time.After(wait)
			continue
		}
		failures = 0
		if res.Writes > 0 {
			cfg.Log.Info("published the fabric", "fabric", s.Fabric, "nodes_on_fabric", res.OnFabric, "nodes_off", res.Off,
				"degraded", res.Degraded, "hypernodes", res.HyperNodes, "writes", res.Writes)
		}
	}
}

// nodeMatters says whether a node's update can change what is published
// of it (not kubelet's heartbeats).
func nodeMatters(before, after any) bool {
	a, okA := before.(*corev1.Node)
	b, okB := after.(*corev1.Node)
	if !okA || !okB {
		return true
	}
	if a.Annotations[AnnotationHosts] != b.Annotations[AnnotationHosts] || a.Annotations[AnnotationFound] != b.Annotations[AnnotationFound] ||
		!maps.Equal(a.Labels, b.Labels) || len(a.Spec.Taints) != len(b.Spec.Taints) || len(a.Status.Addresses) != len(b.Status.Addresses) {
		return true
	}
	for i := range a.Status.Addresses {
		if a.Status.Addresses[i] != b.Status.Addresses[i] {
			return true
		}
	}
	return condition(a) != condition(b)
}

// condition is a node's FabricDegraded condition, as text.
func condition(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionDegraded {
			return string(c.Status) + c.Reason + c.Message
		}
	}
	return ""
}
