package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/apiclient"
	"github.com/accelnet/accelnet/models"
)

// Reserved is what one look at a group did, for metrics and tests.
type Reserved struct {
	// Intent is the group's intent name; ID and State its intent's, if
	// it has one.
	Intent string
	ID     string
	State  models.IntentState
	// Reason is the pods' condition reason; Released counts the intents
	// deleted (the group gone, or one too many).
	Reason   string
	Released int
}

// jobs reserves the fabric for pod groups: one collective intent per
// group, the pods' accelnet.io/fabric condition saying how it stands.
type jobs struct {
	cfg     Config
	core    corev1client.CoreV1Interface
	pods    cache.SharedIndexInformer
	intents *intentView
	queue   workqueue.TypedRateLimitingInterface[string]
	// places are the nodes' places on the fabric, from the last publish
	// (nil before the first).
	placesMu sync.Mutex
	places   map[string]NodePlace
	// refused are the groups refused, with the count of frees when they
	// were: capacity freed since asks them again at once.
	refusedMu sync.Mutex
	refused   map[string]int
	frees     int
}

const groupIndex = "accelnet-group"

func newJobs(cfg Config, core corev1client.CoreV1Interface) *jobs {
	j := &jobs{cfg: cfg, core: core, intents: newIntentView(), refused: map[string]int{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "accelnet-kube-jobs"})}
	lw := cache.NewListWatchFromClient(core.RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	j.pods = cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{groupIndex: j.groupIndexFunc})
	// Only what grouping and the condition need is kept of a pod (a
	// cluster's pods are many; a group's are few).
	j.pods.SetTransform(trimPod)
	return j
}

// trimPod keeps of a pod what accelnet kube reads: of a pod that does not
// opt in, its name only.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	keep := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	if _, opted := p.Annotations[AnnotationCollective]; !opted {
		return keep, nil
	}
	keep.Labels, keep.Annotations, keep.OwnerReferences, keep.DeletionTimestamp = p.Labels, p.Annotations, p.OwnerReferences, p.DeletionTimestamp
	keep.Spec.NodeName, keep.Spec.ReadinessGates = p.Spec.NodeName, p.Spec.ReadinessGates
	keep.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		if c.Type == ConditionFabric {
			keep.Status.Conditions = []corev1.PodCondition{c}
		}
	}
	return keep, nil
}

func (j *jobs) groupIndexFunc(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if _, opted := p.Annotations[AnnotationCollective]; !opted {
		return nil, nil
	}
	if g, ok := groupOf(p, j.cfg.GroupBy); ok {
		return []string{g.Intent}, nil
	}
	return nil, nil
}

// enqueuePod queues the group of a pod (a deleted one too).
func (j *jobs) enqueuePod(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if names, _ := j.groupIndexFunc(obj); len(names) > 0 {
		j.queue.Add(names[0])
	}
}

// podMatters says whether a pod's update can change its group's intent.
func podMatters(before, after any) bool {
	a, okA := before.(*corev1.Pod)
	b, okB := after.(*corev1.Pod)
	if !okA || !okB {
		return true
	}
	return a.Spec.NodeName != b.Spec.NodeName || a.Status.Phase != b.Status.Phase || (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) ||
		!maps.Equal(a.Annotations, b.Annotations) || !maps.Equal(a.Labels, b.Labels)
}

// enqueueAll queues every group and every intent accelnet kube holds.
func (j *jobs) enqueueAll() {
	for _, name := range j.pods.GetIndexer().ListIndexFuncValues(groupIndex) {
		j.queue.Add(name)
	}
	for _, name := range j.intents.names() {
		j.queue.Add(name)
	}
}

// setPlaces hands the jobs the nodes' places of a publish; groups are
// looked at again if any changed.
func (j *jobs) setPlaces(p map[string]NodePlace) {
	j.placesMu.Lock()
	same := j.places != nil && maps.EqualFunc(j.places, p, func(a, b NodePlace) bool { return slices.Equal(a.Hosts, b.Hosts) && a.Problem == b.Problem })
	j.places = p
	j.placesMu.Unlock()
	if !same {
		j.enqueueAll()
	}
}

// run reserves until ctx ends.
func (j *jobs) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer j.queue.ShutDown()
	j.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: j.enqueuePod,
		UpdateFunc: func(before, after any) {
			if podMatters(before, after) {
				j.enqueuePod(before)
				j.enqueuePod(after)
			}
		},
		DeleteFunc: j.enqueuePod,
	})
	wg.Go(func() { j.pods.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), j.pods.HasSynced) {
		return
	}
	wg.Go(func() {
		j.intents.follow(ctx, j.cfg.Accelnet, j.cfg.Log, func(name string) { j.queue.Add(name) }, j.freed, j.enqueueAll)
	})
	for range j.cfg.Workers {
		wg.Go(func() {
			for j.work(ctx) {
			}
		})
	}
	resync := time.NewTicker(j.cfg.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
			j.enqueueAll()
		}
	}
}

// work looks at one queued group; false once the queue is shut down.
func (j *jobs) work(ctx context.Context) bool {
	name, shutdown := j.queue.Get()
	if shutdown {
		return false
	}
	defer j.queue.Done(name)
	res, after, err := j.reconcile(ctx, name)
	if j.cfg.Reserved != nil && ctx.Err() == nil {
		j.cfg.Reserved(res, err)
	}
	switch {
	case ctx.Err() != nil:
	case err != nil:
		j.cfg.Log.Warn("reserving a job's fabric: trying again", "intent", name, "err", err)
		j.queue.AddRateLimited(name)
	default:
		j.queue.Forget(name)
		if after > 0 {
			j.queue.AddAfter(name, after)
		}
	}
	return true
}

// freed asks the refused groups again: a live intent ended, so what did
// not fit may now.
func (j *jobs) freed() {
	j.refusedMu.Lock()
	j.frees++
	names := slices.Collect(maps.Keys(j.refused))
	j.refusedMu.Unlock()
	for _, name := range names {
		j.queue.Add(name)
	}
}

// markRefused records whether a group stands refused (as of now: it is
// due again once capacity is freed after this).
func (j *jobs) markRefused(name string, refused bool) {
	j.refusedMu.Lock()
	defer j.refusedMu.Unlock()
	if refused {
		j.refused[name] = j.frees
	} else {
		delete(j.refused, name)
	}
}

// freedSince says whether capacity was freed since a group was refused.
func (j *jobs) freedSince(name string) bool {
	j.refusedMu.Lock()
	defer j.refusedMu.Unlock()
	at, ok := j.refused[name]
	return ok && j.frees > at
}

// tenant is the accelnet tenant of a namespace ("" for none).
func (j *jobs) tenant(ns string) models.TenantName {
	if t, ok := j.cfg.Tenants[ns]; ok {
		return t
	}
	return j.cfg.Tenants["*"]
}

// reconcile makes a group's intent and its pods' condition what its pods
// ask for; after > 0 asks to be looked at again then.
func (j *jobs) reconcile(ctx context.Context, name string) (res Reserved, after time.Duration, err error) {
	res.Intent = name
	have, synced := j.intents.named(name)
	if !synced {
		return res, 0, nil // every group is looked at once the view is whole
	}
	objs, _ := j.pods.GetIndexer().ByIndex(groupIndex, name)
	pods, finished, winding := splitPods(objs)
	if len(pods) == 0 {
		j.markRefused(name, false)
		if res.Released, err = j.releaseBut(ctx, have, ""); err != nil {
			return res, 0, err
		}
		if res.Released > 0 && len(finished) > 0 {
			g, _ := groupOf(finished[0], j.cfg.GroupBy)
			j.event(ctx, g, finished[0], corev1.EventTypeNormal, "FabricReleased", "the group's pods finished: intent "+name+" deleted")
		}
		return res, 0, nil
	}
	cur := pick(have)
	if winding && cur != nil && cur.Status.State.Live() {
		// Workers that finish one by one leave the reservation as it is
		// until the last is done (a failed one, replaced, does not).
		res.ID, res.State, res.Reason = cur.ID, cur.Status.State, "Finishing"
		return res, 0, nil
	}
	g, _ := groupOf(pods[0], j.cfg.GroupBy)
	j.placesMu.Lock()
	places := j.places
	j.placesMu.Unlock()
	if places == nil {
		return res, 0, nil // looked at again after the first publish
	}
	w := want(g, pods, j.tenant(g.Namespace), places)
	if w.Spec == nil {
		j.markRefused(name, false)
		// Nothing to reserve: a reservation held is released, except while
		// pods are replaced (the ones left still run on it).
		if w.Reason != "WaitingForPods" {
			if res.Released, err = j.releaseBut(ctx, have, ""); err != nil {
				return res, 0, err
			}
		} else if cur != nil && cur.Status.State.Live() {
			res.ID, res.State = cur.ID, cur.Status.State
		}
		res.Reason = w.Reason
		return res, 0, j.setCondition(ctx, g, pods, w.Status, w.Reason, w.Message)
	}
	// One intent per group: the oldest live one stays, the others go.
	keep := ""
	if cur != nil {
		keep = cur.ID
	}
	if res.Released, err = j.releaseBut(ctx, have, keep); err != nil {
		return res, 0, err
	}
	var problem *apiclient.Error
	held := cur != nil && cur.Status.State.Live()
	switch {
	case cur != nil && cur.Status.State == models.StateDeleted:
		// Deleted by someone while its group runs: made again once gone.
		return res, time.Second, nil
	case cur != nil && cur.Status.State.Live() && !sameRequest(cur.Spec, *w.Spec):
		cur, problem, err = j.update(ctx, *cur, *w.Spec)
	case cur != nil && cur.Status.State.Live():
	case cur != nil && cur.Status.State == models.StateRejected && sameRequest(cur.Spec, *w.Spec) &&
		time.Since(cur.Status.Updated) < j.cfg.RetryRefused && !j.freedSince(name):
		// Refused a moment ago: asked again later, not at once.
		after = j.cfg.RetryRefused - time.Since(cur.Status.Updated)
	default:
		// None, or one that failed, was refused a while ago or asked for
		// something else: (again) a new one.
		if cur != nil {
			if err := j.release(ctx, *cur); err != nil {
				return res, 0, err
			}
		}
		cur, problem, err = j.create(ctx, g, w)
	}
	if err != nil {
		if !held {
			// Said on the pods while tried again (a condition they lack
			// would say nothing; one a held intent set stands).
			err = errors.Join(err, j.setCondition(ctx, g, pods, corev1.ConditionFalse, "AccelnetUnavailable",
				"accelnet's API did not answer; asking again"))
		}
		return res, 0, err
	}
	status, reason, message := fabricCondition(cur, problem)
	if problem != nil && problem.Status == http.StatusConflict {
		after = j.cfg.RetryRefused
	}
	if cur != nil {
		res.ID, res.State = cur.ID, cur.Status.State
	}
	res.Reason = reason
	j.markRefused(name, reason == "Refused")
	return res, after, j.setCondition(ctx, g, pods, status, reason, message)
}

// splitPods splits a group's pods into those that run or will (live) and
// those that finished; winding says some finished their work (the job is
// ending).
func splitPods(objs []any) (pods, finished []*corev1.Pod, winding bool) {
	for _, o := range objs {
		if p := o.(*corev1.Pod); live(p) {
			pods = append(pods, p)
		} else {
			finished = append(finished, p)
			winding = winding || p.Status.Phase == corev1.PodSucceeded
		}
	}
	return pods, finished, winding
}

// fabricCondition is what the pods' accelnet.io/fabric condition says of the
// group's intent cur, or of the API's problem with the request.
func fabricCondition(cur *models.Intent, problem *apiclient.Error) (status corev1.ConditionStatus, reason, message string) {
	status = corev1.ConditionFalse
	switch {
	case problem != nil && problem.Status == http.StatusConflict:
		reason, message = "Refused", refusal(cur, problem)
	case problem != nil:
		// Not valid, or not allowed (quota, hosts held by another
		// tenant): said, and asked again when the group changes or at
		// the next resync.
		reason, message = "Invalid", problem.Error()
		if problem.Status == http.StatusForbidden {
			reason = "Forbidden"
		}
	case cur.Status.State == models.StateRejected:
		reason, message = "Refused", refusal(cur, nil)
	case cur.Status.State == models.StateInstalled:
		status, reason = corev1.ConditionTrue, "Installed"
		c := cur.Spec.Collective
		message = fmt.Sprintf("intent %s Installed: %s over %d fabric hosts, %g Gb/s per GPU, for tenant %s", cur.ID, c.Pattern, len(c.Endpoints), c.GbpsPerGPU, cur.Tenant)
	default:
		reason, message = string(cur.Status.State), fmt.Sprintf("intent %s %s: %s", cur.ID, cur.Status.State, cur.Status.Reason)
	}
	return status, reason, message
}

// pick is the intent a group keeps of those with its name (IDs grow with
// time, so the first is the oldest): the oldest live one, else one being
// deleted (waited for), else the latest.
func pick(have []models.Intent) *models.Intent {
	for _, keep := range []func(models.IntentState) bool{
		models.IntentState.Live,
		func(s models.IntentState) bool { return s == models.StateDeleted },
	} {
		for i := range have {
			if keep(have[i].Status.State) {
				return &have[i]
			}
		}
	}
	if len(have) == 0 {
		return nil
	}
	return &have[len(have)-1]
}

// refusal says why an intent (or its update) was refused and what fits:
// accelnet's reason, which names the bottleneck and how much it has left
// (with advice on queue pairs where more would fit).
func refusal(in *models.Intent, p *apiclient.Error) string {
	switch {
	case in != nil && in.Status.State == models.StateRejected:
		return "intent " + in.ID + " refused: " + in.Status.Reason
	case in != nil && in.Status.State.Live():
		return "intent " + in.ID + " cannot move to the pods' nodes (its reservation stands): " + p.Detail
	}
	return "refused: " + p.Detail
}

// create asks accelnet for a group's intent. A refusal is an answer, not
// an error: its problem is returned, with the Rejected intent if stored.
func (j *jobs) create(ctx context.Context, g Group, w Want) (*models.Intent, *apiclient.Error, error) {
	var in models.Intent
	_, err := j.cfg.Accelnet.Do(ctx, "POST", "/api/v1/intents", api.IntentRequest{Tenant: w.Tenant, IntentSpec: *w.Spec}, &in,
		"Idempotency-Key", idempotencyKey(g, w.Tenant, *w.Spec))
	if err == nil {
		j.intents.put(in)
		j.cfg.Log.Info("reserved a job's fabric", "intent", in.Spec.Name, "id", in.ID, "state", in.Status.State, "hosts", len(w.Spec.Collective.Endpoints))
		return &in, nil, nil
	}
	return j.answer(err)
}

// update asks accelnet to move a group's intent to what its pods ask now
// (a pod moved to another node, more pods bound).
func (j *jobs) update(ctx context.Context, cur models.Intent, spec models.IntentSpec) (*models.Intent, *apiclient.Error, error) {
	var in models.Intent
	_, err := j.cfg.Accelnet.Do(ctx, "PUT", "/api/v1/intents/"+url.PathEscape(cur.ID), api.IntentRequest{IntentSpec: spec}, &in,
		"If-Match", strconv.Quote(strconv.FormatInt(cur.Revision, 10)))
	if err == nil {
		j.intents.put(in)
		j.cfg.Log.Info("moved a job's reservation", "intent", in.Spec.Name, "id", in.ID, "state", in.Status.State, "hosts", len(spec.Collective.Endpoints))
		return &in, nil, nil
	}
	if apiclient.StatusOf(err) == http.StatusPreconditionFailed {
		return nil, nil, fmt.Errorf("intent %s changed meanwhile: %w", cur.ID, err) // looked at again with it
	}
	got, p, err := j.answer(err)
	if p != nil && got == nil {
		got = &cur // refused: the reservation held stands
	}
	return got, p, err
}

// answer sorts an error of accelnet's: a problem with the request (a
// refusal, a field, a quota) is returned as such; anything else (accelnet
// unreachable, failing over, overloaded) is an error to try again on.
func (j *jobs) answer(err error) (*models.Intent, *apiclient.Error, error) {
	var p *apiclient.Error
	if !errors.As(err, &p) {
		return nil, nil, err
	}
	switch p.Status {
	case http.StatusConflict, http.StatusUnprocessableEntity, http.StatusBadRequest, http.StatusForbidden:
		if p.Intent != nil {
			j.intents.put(*p.Intent)
		}
		if p.Status == http.StatusUnprocessableEntity && strings.Contains(p.Detail, "being deleted") {
			return nil, nil, err // its key's last intent is on its way out
		}
		return p.Intent, p, nil
	}
	return nil, nil, err
}

// releaseBut deletes the intents of have but the one of ID keep, and
// says how many.
func (j *jobs) releaseBut(ctx context.Context, have []models.Intent, keep string) (int, error) {
	n := 0
	for _, in := range have {
		if in.ID == keep {
			continue
		}
		if err := j.release(ctx, in); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// release deletes an intent of a group (gone, or holding one too many).
func (j *jobs) release(ctx context.Context, in models.Intent) error {
	if in.Status.State == models.StateDeleted {
		return nil // on its way out
	}
	_, err := j.cfg.Accelnet.Do(ctx, "DELETE", "/api/v1/intents/"+url.PathEscape(in.ID), nil, nil)
	if err != nil && apiclient.StatusOf(err) != http.StatusNotFound {
		return fmt.Errorf("release intent %s: %w", in.ID, err)
	}
	j.intents.remove(in.ID)
	j.cfg.Log.Info("released a job's fabric", "intent", in.Spec.Name, "id", in.ID, "was", in.Status.State)
	return nil
}

// setCondition brings the pods' accelnet.io/fabric condition to status,
// reason and message; when the group's answer changes, an Event says so.
func (j *jobs) setCondition(ctx context.Context, g Group, pods []*corev1.Pod, status corev1.ConditionStatus, reason, message string) error {
	var errs []error
	for i, p := range pods {
		var have *corev1.PodCondition
		for k := range p.Status.Conditions {
			if p.Status.Conditions[k].Type == ConditionFabric {
				have = &p.Status.Conditions[k]
			}
		}
		if have != nil && have.Status == status && have.Reason == reason && have.Message == message {
			continue
		}
		if i == 0 && (have == nil || have.Status != status || have.Reason != reason) {
			if typ, ok := eventOf(status, reason); ok {
				evReason := reason
				if !strings.Contains(reason, "Fabric") {
					evReason = "Fabric" + reason // FabricInstalled, FabricRefused…
				}
				j.event(ctx, g, p, typ, evReason, message)
			}
		}
		now := metav1.Now()
		cond := corev1.PodCondition{Type: ConditionFabric, Status: status, Reason: reason, Message: message, LastTransitionTime: now, LastProbeTime: now}
		if have != nil && have.Status == status {
			cond.LastTransitionTime = have.LastTransitionTime
		}
		data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
		if err != nil {
			return err
		}
		_, err = j.core.Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: managedBy}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// eventOf is the Event type of a condition's reason, if it makes one
// (waiting states do not: they pass).
func eventOf(status corev1.ConditionStatus, reason string) (string, bool) {
	switch reason {
	case "Installed":
		return corev1.EventTypeNormal, true
	case "WaitingForPods", "Pending", "Admitted", "NoReservation", "OneHost":
		return "", false
	}
	return corev1.EventTypeWarning, status == corev1.ConditionFalse
}

// event records an Event on the group's owner (a Job, JobSet…), or on pod
// if it has none.
func (j *jobs) event(ctx context.Context, g Group, pod *corev1.Pod, typ, reason, message string) {
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID, Namespace: pod.Namespace}
	if o := g.Owner; o != nil {
		ref = corev1.ObjectReference{Kind: o.Kind, APIVersion: o.APIVersion, Name: o.Name, UID: o.UID, Namespace: pod.Namespace}
	}
	recordEvent(ctx, j.core, ref, typ, reason, message, j.cfg.Identity, j.cfg.Log)
}

// recordEvent records an Event about ref (in ref's namespace, or default
// for a cluster-scoped object).
func recordEvent(ctx context.Context, core corev1client.CoreV1Interface, ref corev1.ObjectReference, typ, reason, message, component string, log *slog.Logger) {
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	if len(message) > 1024 {
		message = message[:1021] + "..."
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: ref.Name + ".", Namespace: ns},
		InvolvedObject: ref,
		Type:           typ, Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "accelnet.io/" + managedBy, ReportingInstance: component,
	}
	if _, err := core.Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
		log.Warn("event not recorded", "object", ref.Kind+"/"+ref.Name, "reason", reason, "err", err)
	}
}
