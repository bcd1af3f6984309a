package store

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/raft/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

var (
	// ErrNoTopology means etcd has no topology yet.
	ErrNoTopology = errors.New("no topology stored")
	// ErrConflict means a write lost a race with another writer (revision check).
	ErrConflict = errors.New("concurrent update")
	// ErrStoreUnavailable means etcd could not be reached in time.
	ErrStoreUnavailable = errors.New("etcd unavailable")
	// ErrNotFound means the named tenant, token, intent or drain does not
	// exist (or belongs to another tenant, which looks the same from
	// outside).
	ErrNotFound = errors.New("not found")
)

// Store is accelnet's view of etcd.
type Store struct {
	cli     *clientv3.Client
	timeout time.Duration
}

// NewStore wraps an etcd client. Each call is bounded by timeout (default 5s).
func NewStore(cli *clientv3.Client, timeout time.Duration) *Store {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Store{cli: cli, timeout: timeout}
}

// Client is the underlying etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }

func (s *Store) Wrap(err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrNoLeader) ||
		unavailable(status.Code(err)) || unavailable(etcdCode(err)) || stopped(err) {
		return fmt.Errorf("%w: %s: %v", ErrStoreUnavailable, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func unavailable(c codes.Code) bool { return c == codes.Unavailable || c == codes.DeadlineExceeded }

// etcdCode is the gRPC code of an etcd server's error as the client
// returns it (rpctypes.EtcdError: "server stopped", "leader changed",
// "timed out" ...), which carries no gRPC status; codes.OK otherwise.
func etcdCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return codes.OK
}

// stopped says whether err is a stopped etcd's raft answering a write
// of an in-process client (the error reaches it as an unknown gRPC
// status; over a socket a stopped etcd is a closed connection).
func stopped(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unknown && st.Message() == raft.ErrStopped.Error()
}

// Dial connects an etcd client to endpoints, over TLS with tlsConfig
// (nil: plaintext).
func Dial(endpoints []string, tlsConfig *tls.Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		TLS:         tlsConfig,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", endpoints, err)
	}
	return cli, nil
}

// KV is one key's value (or deletion) from a list or a watch.
type KV struct {
	Key      string
	Value    []byte
	Revision int64 // the key's mod revision
	Deleted  bool
}

// eventKV is a watch event as a KV.
func eventKV(ev *clientv3.Event) KV {
	return KV{Key: string(ev.Kv.Key), Value: ev.Kv.Value, Revision: ev.Kv.ModRevision, Deleted: ev.Type == clientv3.EventTypeDelete}
}

// Follow lists prefix and calls fn with everything (reset true), then
// watches from the next revision and calls fn with each change, re-listing
// after compaction or a broken watch, until ctx ends.
func (s *Store) Follow(ctx context.Context, prefix string, fn func(kvs []KV, reset bool)) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, s.timeout)
		resp, err := s.cli.Get(lctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		all := make([]KV, len(resp.Kvs))
		for i, e := range resp.Kvs {
			all[i] = KV{Key: string(e.Key), Value: e.Value, Revision: e.ModRevision}
		}
		fn(all, true)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for w := range s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if w.Err() != nil {
				break
			}
			changes := make([]KV, len(w.Events))
			for i, ev := range w.Events {
				changes[i] = eventKV(ev)
			}
			fn(changes, false)
		}
		wcancel()
	}
	return nil
}

// List reads every key under prefix at revision rev (0: the latest) and
// returns them with the revision they were read at.
func (s *Store) List(ctx context.Context, prefix string, rev int64) ([]KV, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.cli.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, 0, s.Wrap(err, "list "+prefix)
	}
	out := make([]KV, len(resp.Kvs))
	for i, e := range resp.Kvs {
		out[i] = KV{Key: string(e.Key), Value: e.Value, Revision: e.ModRevision}
	}
	return out, resp.Header.Revision, nil
}

// ListSince brings a copy of prefix that was current at revision since
// up to date: at one revision (returned), every key under prefix with its
// mod revision but no value (keys), and the keys written after since with
// their values (changed). A key of the copy missing from keys was
// deleted. Cheaper than List when few keys changed: only their values
// travel and need decoding.
func (s *Store) ListSince(ctx context.Context, prefix string, since int64) (keys, changed []KV, rev int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithMinModRev(since+1)),
	).Commit()
	if err != nil {
		return nil, nil, 0, s.Wrap(err, "list "+prefix)
	}
	read := func(i int, values bool) []KV {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		out := make([]KV, len(kvs))
		for j, e := range kvs {
			out[j] = KV{Key: string(e.Key), Revision: e.ModRevision}
			if values {
				out[j].Value = e.Value
			}
		}
		return out
	}
	return read(0, false), read(1, true), resp.Header.Revision, nil
}

// Changes brings a copy of prefix that was current at revision since up
// to date by watching from since+1 until etcd says the watch has caught
// up (a progress notification, asked for until it comes): the changes
// in order, and the revision the copy is then current at, with a count
// of the keys under prefix at that revision to check the copy by. It
// reads only what changed; ListSince reads every key. It fails if the
// revisions after since were compacted away, or within the store's
// timeout.
func (s *Store) Changes(ctx context.Context, prefix string, since int64) (changes []KV, rev, count int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// A watch stream of its own: a progress notification comes only
	// once every watch on the stream is in sync, and the stream's other
	// watches are not this one's business.
	ctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "accelnet-watch", "changes")
	now, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, 0, 0, s.Wrap(err, "count "+prefix)
	}
	if now.Header.Revision <= since { // nothing written since (a watch from the future would never catch up)
		return nil, now.Header.Revision, now.Count, nil
	}
	ask := time.NewTicker(50 * time.Millisecond)
	defer ask.Stop()
	w := s.cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(since+1), clientv3.WithCreatedNotify())
	created := false
	for {
		select {
		case resp, ok := <-w:
			switch {
			case !ok:
				return nil, 0, 0, s.Wrap(cmp.Or(ctx.Err(), errors.New("watch closed")), "watch "+prefix)
			case resp.Err() != nil:
				return nil, 0, 0, s.Wrap(resp.Err(), "watch "+prefix)
			case resp.Created:
				created = true
				if err := s.cli.RequestProgress(ctx); err != nil {
					return nil, 0, 0, s.Wrap(err, "watch "+prefix)
				}
			case resp.IsProgressNotify():
				cresp, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(resp.Header.Revision))
				if err != nil {
					return nil, 0, 0, s.Wrap(err, "count "+prefix)
				}
				return changes, resp.Header.Revision, cresp.Count, nil
			}
			for _, ev := range resp.Events {
				changes = append(changes, eventKV(ev))
			}
		case <-ask.C:
			if created { // ignored while the watch is behind: asked again
				if err := s.cli.RequestProgress(ctx); err != nil {
					return nil, 0, 0, s.Wrap(err, "watch "+prefix)
				}
			}
		}
	}
}

// WatchKey calls fn with each change of key from revision fromRev on,
// until ctx ends (nil) or the watch breaks, for instance after a
// compaction (its error: list again, then watch from there).
func (s *Store) WatchKey(ctx context.Context, key string, fromRev int64, fn func(KV)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.cli.Watch(wctx, key, clientv3.WithRev(fromRev)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			fn(eventKV(ev))
		}
	}
	return ctx.Err()
}

// PutJSONIfUnchanged stores v at key only if no key under prefix was
// written or created after revision rev (a deletion does not count): a
// decision taken on what List(prefix) returned at rev stands only while
// that is still all there is. Otherwise it returns ErrConflict.
func (s *Store) PutJSONIfUnchanged(ctx context.Context, prefix string, rev int64, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	unchanged := clientv3.Compare(clientv3.ModRevision(prefix), "<", rev+1).WithPrefix()
	return s.Txn(ctx, []clientv3.Cmp{unchanged}, []clientv3.Op{clientv3.OpPut(key, string(data))})
}

// Delete removes key (nothing happens if it does not exist).
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.Txn(ctx, nil, []clientv3.Op{clientv3.OpDelete(key)})
}

// GetJSON reads key into v; found is false when the key does not exist.
func (s *Store) GetJSON(ctx context.Context, key string, v any) (found bool, modRevision int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return false, 0, s.Wrap(err, "get "+key)
	}
	if len(resp.Kvs) == 0 {
		return false, 0, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, v); err != nil {
		return false, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, resp.Kvs[0].ModRevision, nil
}

func (s *Store) PutJSON(ctx context.Context, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Txn(ctx, nil, []clientv3.Op{clientv3.OpPut(key, string(data))})
}

// Txn commits ops if every comparison holds, else returns ErrConflict.
func (s *Store) Txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) error {
	_, err := s.Commit(ctx, cmps, ops)
	return err
}

// Commit is txn returning the revision committed at.
func (s *Store) Commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, s.Wrap(err, "etcd transaction")
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, s.Wrap(err, "delete "+prefix)
	}
	return resp.Deleted, nil
}

// Follower lists and watches a prefix (Store.Follow).
type Follower interface {
	Follow(ctx context.Context, prefix string, fn func(kvs []KV, reset bool)) error
}

// FollowJSON keeps *m (key after prefix → decoded value) in step with
// etcd under mu, calling changed (if set) after every update; values that
// do not decode are dropped.
func FollowJSON[K ~string, V any](ctx context.Context, s Follower, prefix string, mu sync.Locker, m *map[K]V, changed func()) error {
	return s.Follow(ctx, prefix, func(kvs []KV, reset bool) {
		mu.Lock()
		if reset {
			*m = map[K]V{}
		}
		for _, e := range kvs {
			k := K(strings.TrimPrefix(e.Key, prefix))
			var v V
			if e.Deleted || json.Unmarshal(e.Value, &v) != nil {
				delete(*m, k)
			} else {
				(*m)[k] = v
			}
		}
		mu.Unlock()
		if changed != nil {
			changed()
		}
	})
}
