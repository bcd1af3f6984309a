package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

// tokenStore is etcd's token keys in memory, recording reads; beforeGet,
// if set, runs inside a read, after etcd answered it.
type tokenStore struct {
	keys      map[string][]byte
	gets      int
	beforeGet func()
}

func (s *tokenStore) Follow(context.Context, string, func([]store.KV, bool)) error { return nil }

func (s *tokenStore) GetJSON(_ context.Context, key string, v any) (bool, int64, error) {
	s.gets++
	data, ok := s.keys[key]
	if s.beforeGet != nil {
		s.beforeGet()
	}
	if !ok {
		return false, 0, nil
	}
	return true, 1, json.Unmarshal(data, v)
}

func (s *tokenStore) PutJSON(context.Context, string, any) error { return errors.New("not here") }
func (s *tokenStore) Txn(context.Context, []clientv3.Cmp, []clientv3.Op) error {
	return errors.New("not here")
}
func (s *tokenStore) List(context.Context, string, int64) ([]store.KV, int64, error) {
	return nil, 0, errors.New("not here")
}
func (s *tokenStore) DeletePrefix(context.Context, string) (int64, error) {
	return 0, errors.New("not here")
}

// TestRevocationWins: a token read from etcd on a cache miss, whose
// deletion the watch delivers while the read is under way, is refused and
// not cached: a revoked token never works on from the cache.
func TestRevocationWins(t *testing.T) {
	secret, h, err := newSecret()
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := json.Marshal(models.Token{ID: h[:16], Role: models.RoleOperator})
	s := &tokenStore{keys: map[string][]byte{store.KeyTokens + h: tok}}
	a := NewAuth(s)
	s.beforeGet = func() {
		// Another replica revokes it; this replica's watch applies that
		// before the read's answer is used.
		a.applyTokens([]store.KV{{Key: store.KeyTokens + h, Deleted: true, Revision: 2}}, false)
	}
	if _, err := a.Authenticate(t.Context(), secret, nil); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a token revoked during its lookup: %v, want ErrUnauthenticated", err)
	}
	s.beforeGet = nil
	if _, err := a.Authenticate(t.Context(), secret, nil); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("the revoked token, asked again: %v, want ErrUnauthenticated", err)
	}
}

// TestUnknownTokensCached: an unknown token sent again and again is read
// from etcd once while it stays unknown, and again once that has lapsed.
func TestUnknownTokensCached(t *testing.T) {
	s := &tokenStore{keys: map[string][]byte{}}
	a := NewAuth(s)
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	for range 1000 {
		if _, err := a.Authenticate(t.Context(), tokenPrefix+"bogus", nil); !errors.Is(err, ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	if s.gets != 1 {
		t.Fatalf("%d etcd reads for one unknown token sent 1000 times, want 1", s.gets)
	}
	now = now.Add(unknownFor + time.Second)
	if _, err := a.Authenticate(t.Context(), tokenPrefix+"bogus", nil); !errors.Is(err, ErrUnauthenticated) || s.gets != 2 {
		t.Fatalf("after %v: %v, %d reads; want it read again", unknownFor, err, s.gets)
	}
}
