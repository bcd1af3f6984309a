package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/accelnet/accelnet/models"
)

// How the topology is stored: KeyTopology holds a small head naming the
// parts in order; each part (fabric/<kind>-<sha256 of it>) holds a run of
// switches, links or hosts of at most maxPartBytes. A part is named by its
// content, so a new topology writes only the parts that changed (a link
// changed is one part, not the fabric) and the head, in one small
// transaction, is what readers and watchers see change. One key of a whole
// k=32 fat-tree would be 2.3 MB, over etcd's request limit (1.5 MiB by
// default).
const (
	// KeyTopologyParts holds the topology's parts.
	KeyTopologyParts = Prefix + "fabric/"
	// keyTopologyLock serializes writers of the topology (their parts
	// and the head), so that none deletes parts another is about to use.
	keyTopologyLock = Prefix + "locks/topology"
	maxPartBytes    = 256 << 10
	// A transaction of parts stays under these, within any etcd's
	// defaults (--max-request-bytes 1.5 MiB, --max-txn-ops 128).
	maxTxnBytes = 1 << 20
	maxTxnOps   = 100
	// headFormat marks a head (a topology stored whole, before parts, has
	// no format field).
	headFormat = 2
)

type topologyHead struct {
	Format int    `json:"format"`
	Name   string `json:"name,omitempty"`
	// Parts are the parts' keys under KeyTopologyParts, in order.
	Parts []string `json:"parts"`
}

// Topology returns the stored topology with the head's mod revision (for
// PutTopology's check) and the store revision it was read at (to watch
// the head from).
func (s *Store) Topology(ctx context.Context) (t models.Topology, modRevision, revision int64, err error) {
	return s.TopologyAt(ctx, 0)
}

// TopologyAt reads the topology as it was at revision rev (0: now): the
// head and its parts at one revision, so never half of a change.
func (s *Store) TopologyAt(ctx context.Context, rev int64) (t models.Topology, modRevision, revision int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, KeyTopology, opts...)
	if err != nil {
		return t, 0, 0, s.Wrap(err, "get topology")
	}
	revision = resp.Header.Revision
	if rev > 0 {
		revision = rev
	}
	if len(resp.Kvs) == 0 {
		return t, 0, revision, ErrNoTopology
	}
	modRevision = resp.Kvs[0].ModRevision
	var head topologyHead
	if err := json.Unmarshal(resp.Kvs[0].Value, &head); err != nil {
		return t, 0, revision, fmt.Errorf("decode stored topology: %w", err)
	}
	if head.Format == 0 { // stored whole, by an earlier version
		if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
			return t, 0, revision, fmt.Errorf("decode stored topology: %w", err)
		}
		return t, modRevision, revision, nil
	}
	parts, err := s.cli.Get(ctx, KeyTopologyParts, clientv3.WithPrefix(), clientv3.WithRev(revision))
	if err != nil {
		return t, 0, 0, s.Wrap(err, "get topology parts")
	}
	byKey := make(map[string][]byte, len(parts.Kvs))
	for _, kv := range parts.Kvs {
		byKey[strings.TrimPrefix(string(kv.Key), KeyTopologyParts)] = kv.Value
	}
	t.Name = head.Name
	for _, p := range head.Parts {
		data, ok := byKey[p]
		if !ok {
			return models.Topology{}, 0, revision, fmt.Errorf("stored topology at revision %d: part %s is missing", revision, p)
		}
		var part models.Topology
		if err := json.Unmarshal(data, &part); err != nil {
			return models.Topology{}, 0, revision, fmt.Errorf("decode topology part %s: %w", p, err)
		}
		t.Switches = append(t.Switches, part.Switches...)
		t.Links = append(t.Links, part.Links...)
		t.Hosts = append(t.Hosts, part.Hosts...)
	}
	return t, modRevision, revision, nil
}

// PutTopology validates and stores a topology. If expectModRevision is not
// negative, the write only happens if the head's mod revision still equals
// it (0: none stored yet); otherwise it returns ErrConflict. Only the parts
// not stored already are written; those no longer used are deleted after.
func (s *Store) PutTopology(ctx context.Context, t models.Topology, expectModRevision int64) (int64, error) {
	if err := t.Validate(); err != nil {
		return 0, err
	}
	parts, err := topologyParts(t)
	if err != nil {
		return 0, err
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithContext(ctx), concurrency.WithTTL(10))
	if err != nil {
		return 0, s.Wrap(err, "topology lock")
	}
	defer sess.Close()
	lock := concurrency.NewMutex(sess, keyTopologyLock)
	lockCtx, cancel := context.WithTimeout(ctx, s.timeout)
	err = lock.Lock(lockCtx)
	cancel()
	if err != nil {
		return 0, s.Wrap(err, "topology lock")
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
		_ = lock.Unlock(unlockCtx)
	}()

	stored, err := s.partKeys(ctx)
	if err != nil {
		return 0, err
	}
	var ops []clientv3.Op
	bytes := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := s.Txn(ctx, []clientv3.Cmp{lock.IsOwner()}, ops)
		ops, bytes = ops[:0], 0
		return err
	}
	head := topologyHead{Format: headFormat, Name: t.Name}
	for _, p := range parts {
		head.Parts = append(head.Parts, p.key)
		if stored[p.key] {
			continue
		}
		stored[p.key] = true
		if len(ops) >= maxTxnOps || bytes+len(p.data) > maxTxnBytes {
			if err := flush(); err != nil {
				return 0, fmt.Errorf("put topology parts: %w", err)
			}
		}
		ops = append(ops, clientv3.OpPut(KeyTopologyParts+p.key, string(p.data)))
		bytes += len(p.data)
	}
	if err := flush(); err != nil {
		return 0, fmt.Errorf("put topology parts: %w", err)
	}
	data, err := json.Marshal(head)
	if err != nil {
		return 0, fmt.Errorf("encode topology: %w", err)
	}
	cmps := []clientv3.Cmp{lock.IsOwner()}
	if expectModRevision >= 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(KeyTopology), "=", expectModRevision))
	}
	rev, err := s.Commit(ctx, cmps, []clientv3.Op{clientv3.OpPut(KeyTopology, string(data))})
	if err != nil {
		return 0, err // ErrConflict if the head moved; the new parts are swept next time
	}
	// Parts the head no longer names: readers of an older revision still
	// see them (etcd keeps history until compaction).
	used := make(map[string]bool, len(head.Parts))
	for _, p := range head.Parts {
		used[p] = true
	}
	var stale []clientv3.Op
	for k := range stored {
		if !used[k] {
			stale = append(stale, clientv3.OpDelete(KeyTopologyParts+k))
		}
	}
	for len(stale) > 0 {
		n := min(len(stale), maxTxnOps)
		if err := s.Txn(ctx, []clientv3.Cmp{lock.IsOwner()}, stale[:n]); err != nil {
			break // left for the next write to sweep
		}
		stale = stale[n:]
	}
	return rev, nil
}

// partKeys lists the stored parts' keys (not their values).
func (s *Store) partKeys(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, KeyTopologyParts, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, s.Wrap(err, "list topology parts")
	}
	out := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), KeyTopologyParts)] = true
	}
	return out, nil
}

type topologyPart struct {
	key  string
	data []byte
}

// topologyParts cuts t's switches, links and hosts into runs of at most
// maxPartBytes of JSON each, in order, named by kind and content. A part
// is the JSON of a models.Topology holding that one list, assembled from
// its items' JSON (each item is encoded once).
func topologyParts(t models.Topology) ([]topologyPart, error) {
	var out []topologyPart
	for _, list := range []struct {
		kind, field string
		items       []any
	}{
		{"s", "switches", anys(t.Switches)}, {"l", "links", anys(t.Links)}, {"h", "hosts", anys(t.Hosts)},
	} {
		var run [][]byte
		size := 0
		emit := func() {
			data := []byte(`{"` + list.field + `":[`)
			data = append(data, bytes.Join(run, []byte(","))...)
			data = append(data, "]}"...)
			sum := sha256.Sum256(data)
			out = append(out, topologyPart{key: list.kind + "-" + hex.EncodeToString(sum[:]), data: data})
			run, size = nil, 0
		}
		for _, it := range list.items {
			data, err := json.Marshal(it)
			if err != nil {
				return nil, fmt.Errorf("encode topology: %w", err)
			}
			if len(run) > 0 && size+len(data)+1 > maxPartBytes {
				emit()
			}
			run, size = append(run, data), size+len(data)+1
		}
		if len(run) > 0 {
			emit()
		}
	}
	return out, nil
}

func anys[T any](items []T) []any {
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}
