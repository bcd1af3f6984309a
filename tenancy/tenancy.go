// Package tenancy keeps tenants, their quotas and their bearer tokens (only
// hashes are stored): who may ask for what, checked on every request.
package tenancy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
)

var (
	// ErrUnauthenticated means a bearer token is missing or unknown.
	ErrUnauthenticated = errors.New("unknown token")
	// ErrTooManyTokens means a tenant holds MaxTokensPerTenant tokens.
	ErrTooManyTokens = errors.New("too many tokens")
	// ErrLookupRefused means a token not in the cache was not looked up
	// in etcd (Authenticate's mayLookUp said no).
	ErrLookupRefused = errors.New("token look-up refused")
	// ErrLastOperator means the token is the last operator token.
	ErrLastOperator = errors.New("the last operator token")
	// ErrHostHeld means a host is held exclusively by another tenant.
	ErrHostHeld = errors.New("host held by another tenant")
)

// MaxTokensPerTenant bounds a tenant's tokens (each is an etcd key, and
// deleting the tenant revokes them together).
const MaxTokensPerTenant = 100

// tokenPrefix marks accelnet secrets so secret scanners can find leaked ones.
const tokenPrefix = "anet_"

// NewSecret makes a token secret (256 random bits), for a deployment that
// provisions the first operator token itself (BootstrapOperator's given).
func NewSecret() (string, error) {
	secret, _, err := newSecret()
	return secret, err
}

// ValidSecret says whether s has a token secret's form.
func ValidSecret(s string) bool {
	raw, ok := strings.CutPrefix(s, tokenPrefix)
	b, err := base64.RawURLEncoding.DecodeString(raw)
	return ok && err == nil && len(b) == 32
}

// newSecret makes a token secret (256 random bits) and its hash.
func newSecret() (secret, hash string, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", err
	}
	secret = tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return secret, hashSecret(secret), nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Store is what tenancy needs of etcd (store.Store).
type Store interface {
	store.Follower
	GetJSON(ctx context.Context, key string, v any) (found bool, modRevision int64, err error)
	PutJSON(ctx context.Context, key string, v any) error
	Txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) error
	List(ctx context.Context, prefix string, rev int64) ([]store.KV, int64, error)
	DeletePrefix(ctx context.Context, prefix string) (int64, error)
}

// Auth keeps tenants and tokens in etcd, with a write-through cache that a
// watch keeps current when another replica changes them.
type Auth struct {
	store Store
	now   func() time.Time
	mu    sync.RWMutex
	// tokens by secret hash; tenants by name.
	tokens  map[string]models.Token
	tenants map[models.TenantName]models.Tenant
	// revoked are the tokens (by hash) seen deleted, and when: a token
	// read from etcd on a cache miss just before its deletion must not be
	// cached after it (revocation always wins). Hashes are never reused,
	// so an entry only has to outlive any read under way (revokedFor).
	revoked map[string]time.Time
	// unknown are hashes etcd did not know, briefly (unknownFor): a bogus
	// token sent again and again costs one etcd read, not one each.
	unknown map[string]time.Time
	// revocation is closed (and replaced) when a token is revoked or a
	// tenant deleted, here or on another replica: open event streams
	// then check that their token still holds (see Revocation).
	revocation chan struct{}
}

const (
	revokedFor = time.Minute
	unknownFor = 5 * time.Second
	maxUnknown = 1 << 16
)

// NewAuth returns an Auth over store; Run loads and follows etcd.
func NewAuth(store Store) *Auth {
	return &Auth{store: store, now: time.Now, tokens: map[string]models.Token{}, tenants: map[models.TenantName]models.Tenant{},
		revoked: map[string]time.Time{}, unknown: map[string]time.Time{}, revocation: make(chan struct{})}
}

// Revocation returns a channel closed at the next revocation of any token
// or deletion of any tenant: whoever holds a token's authority beyond one
// request (an event stream) checks Holds when it closes.
func (a *Auth) Revocation() <-chan struct{} {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.revocation
}

// revoke records h as revoked (a.mu held) and tells the streams.
func (a *Auth) revoke(h string, now time.Time) {
	delete(a.tokens, h)
	a.revoked[h] = now
	a.announce()
}

// announce closes the revocation channel for a new one (a.mu held).
func (a *Auth) announce() {
	close(a.revocation)
	a.revocation = make(chan struct{})
}

// Holds says whether the token with this secret is still valid: not
// revoked, and its tenant (if any) not deleted. An error reaching etcd
// counts as no: the holder reconnects and is authenticated afresh.
func (a *Auth) Holds(ctx context.Context, secret string) bool {
	h := hashSecret(secret)
	a.mu.RLock()
	t, ok := a.tokens[h]
	a.mu.RUnlock()
	if !ok {
		return false
	}
	if t.Tenant == "" {
		return true
	}
	_, err := a.Tenant(ctx, t.Tenant)
	return err == nil
}

// Run lists tenants and tokens, then follows changes until ctx ends.
func (a *Auth) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.store.Follow(ctx, store.KeyTokens, a.applyTokens) })
	g.Go(func() error {
		return store.FollowJSON(ctx, a.store, store.KeyTenants, &a.mu, &a.tenants, func() {
			a.mu.Lock()
			a.announce() // a tenant may be gone: streams check theirs
			a.mu.Unlock()
		})
	})
	return g.Wait()
}

// applyTokens applies tokens listed or watched in etcd to the cache,
// remembering which were deleted (see revoked).
func (a *Auth) applyTokens(kvs []store.KV, reset bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if reset {
		listed := make(map[string]bool, len(kvs))
		for _, kv := range kvs {
			listed[strings.TrimPrefix(kv.Key, store.KeyTokens)] = true
		}
		for h := range a.tokens {
			if !listed[h] {
				a.revoke(h, now) // deleted while the watch was down
			}
		}
		a.tokens = map[string]models.Token{}
	}
	for _, kv := range kvs {
		h := strings.TrimPrefix(kv.Key, store.KeyTokens)
		var t models.Token
		if kv.Deleted || json.Unmarshal(kv.Value, &t) != nil {
			a.revoke(h, now)
			continue
		}
		a.tokens[h] = t
		delete(a.unknown, h)
	}
	for h, at := range a.revoked {
		if now.Sub(at) > revokedFor {
			delete(a.revoked, h)
		}
	}
}

// Authenticate maps a bearer secret to its token. A cache miss is checked
// in etcd, so a token made on another replica works at once, unless
// mayLookUp (nil: always) says no: then it is ErrLookupRefused. So a
// client sending unknown tokens can be refused the etcd reads they cost
// while a valid token from the same place is still served from the cache.
func (a *Auth) Authenticate(ctx context.Context, secret string, mayLookUp func() bool) (models.Token, error) {
	if !strings.HasPrefix(secret, tokenPrefix) {
		return models.Token{}, ErrUnauthenticated
	}
	h := hashSecret(secret)
	a.mu.RLock()
	t, ok := a.tokens[h]
	unknownAt, unknown := a.unknown[h]
	a.mu.RUnlock()
	if ok {
		return t, nil
	}
	if unknown && a.now().Sub(unknownAt) < unknownFor {
		return models.Token{}, ErrUnauthenticated
	}
	if mayLookUp != nil && !mayLookUp() {
		return models.Token{}, ErrLookupRefused
	}
	var stored models.Token
	found, _, err := a.store.GetJSON(ctx, store.KeyTokens+h, &stored)
	if err != nil {
		return models.Token{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !found {
		if len(a.unknown) >= maxUnknown {
			clear(a.unknown)
		}
		a.unknown[h] = a.now()
		return models.Token{}, ErrUnauthenticated
	}
	if _, gone := a.revoked[h]; gone {
		return models.Token{}, ErrUnauthenticated // deleted while we read it
	}
	a.tokens[h] = stored
	return stored, nil
}

// Tenant returns a tenant by name.
func (a *Auth) Tenant(ctx context.Context, name models.TenantName) (models.Tenant, error) {
	a.mu.RLock()
	t, ok := a.tenants[name]
	a.mu.RUnlock()
	if ok {
		return t, nil
	}
	found, _, err := a.store.GetJSON(ctx, store.KeyTenants+string(name), &t)
	if err != nil {
		return t, err
	}
	if !found {
		return t, fmt.Errorf("%w: tenant %q", store.ErrNotFound, name)
	}
	return t, nil
}

// MayUse says whether tenant t may reserve to or from host: its own grant
// allows it and no other tenant holds it exclusively.
func (a *Auth) MayUse(t models.Tenant, host string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return models.MayUse(t, host, maps.Values(a.tenants))
}

// HeldBy names the tenants other than t that hold host exclusively.
func (a *Auth) HeldBy(t models.TenantName, host string) []models.TenantName {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []models.TenantName
	for _, o := range a.tenants {
		if o.Name != t && o.HoldsHost(host) {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Tenants lists tenants by name.
func (a *Auth) Tenants() []models.Tenant {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.SortedFunc(maps.Values(a.tenants), func(x, y models.Tenant) int { return strings.Compare(string(x.Name), string(y.Name)) })
}

// PutTenant creates a tenant or replaces its quotas. A tenant that holds
// hosts is written in one etcd transaction that checks no tenant changed
// since the holders were read from etcd (not this replica's cache), so of
// two tenants asking at once for the same host one gets it and the other
// ErrHostHeld. hosts are the fabric's host names the holds are checked
// over (nil: holds conflict only when they are the same pattern).
func (a *Auth) PutTenant(ctx context.Context, t models.Tenant, hosts []string) (models.Tenant, error) {
	if err := t.Validate(); err != nil {
		return t, err
	}
	key := store.KeyTenants + string(t.Name)
	for attempt := 0; ; attempt++ {
		kvs, rev, err := a.store.List(ctx, store.KeyTenants, 0)
		if err != nil {
			return t, err
		}
		t.Created = time.Time{}
		var others []models.Tenant
		for _, kv := range kvs {
			var o models.Tenant
			if json.Unmarshal(kv.Value, &o) != nil {
				continue
			}
			if o.Name == t.Name {
				t.Created = o.Created
				continue
			}
			others = append(others, o)
		}
		if err := heldElsewhere(t, others, hosts); err != nil {
			return t, err
		}
		if t.Created.IsZero() {
			t.Created = time.Now().UTC()
		}
		data, err := json.Marshal(t)
		if err != nil {
			return t, err
		}
		var cmps []clientv3.Cmp
		if len(t.Holds) > 0 {
			// No tenant created or changed since the list: no new holder.
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(store.KeyTenants), "<", rev+1).WithPrefix())
		}
		err = a.store.Txn(ctx, cmps, []clientv3.Op{clientv3.OpPut(key, string(data))})
		if errors.Is(err, store.ErrConflict) && attempt < 20 {
			continue
		}
		if err != nil {
			return t, err
		}
		a.mu.Lock()
		a.tenants[t.Name] = t
		a.mu.Unlock()
		return t, nil
	}
}

// heldElsewhere says which host of t's holds another tenant holds.
func heldElsewhere(t models.Tenant, others []models.Tenant, hosts []string) error {
	if len(t.Holds) == 0 {
		return nil
	}
	for _, o := range others {
		if len(o.Holds) == 0 {
			continue
		}
		for _, h := range hosts {
			if t.HoldsHost(h) && o.HoldsHost(h) {
				return fmt.Errorf("%w: host %s is held exclusively by tenant %s already", ErrHostHeld, h, o.Name)
			}
		}
		for _, p := range t.Holds {
			if slices.Contains(o.Holds, p) {
				return fmt.Errorf("%w: %q is held exclusively by tenant %s already", ErrHostHeld, p, o.Name)
			}
		}
	}
	return nil
}

// DeleteTenant removes a tenant and every token of it, in one etcd
// transaction: the tokens are listed from etcd (not this replica's cache)
// and the transaction fails if a token was issued since, to be retried. Its
// intents are for the intents' owner to remove (intents.Manager.DeleteTenant).
func (a *Auth) DeleteTenant(ctx context.Context, name models.TenantName) error {
	if _, err := a.Tenant(ctx, name); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		kvs, rev, err := a.store.List(ctx, store.KeyTokens, 0)
		if err != nil {
			return err
		}
		key := store.KeyTenants + string(name)
		ops := []clientv3.Op{clientv3.OpDelete(key)}
		var hashes []string
		for _, kv := range kvs {
			var t models.Token
			if json.Unmarshal(kv.Value, &t) == nil && t.Tenant == name {
				ops = append(ops, clientv3.OpDelete(kv.Key))
				hashes = append(hashes, strings.TrimPrefix(kv.Key, store.KeyTokens))
			}
		}
		if len(ops) > maxTxnTokens {
			// More than one transaction holds: revoke them a part at a
			// time, the tenant (and the rest) last.
			if err := a.store.Txn(ctx, nil, ops[1:maxTxnTokens+1]); err != nil {
				return err
			}
			a.forget(hashes[:maxTxnTokens])
			continue
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.Version(key), ">", 0),
			// No token issued since the list (CreateToken of this tenant
			// compares the tenant's key, so none can follow the delete).
			clientv3.Compare(clientv3.CreateRevision(store.KeyTokens), "<", rev+1).WithPrefix(),
		}
		err = a.store.Txn(ctx, cmps, ops)
		if errors.Is(err, store.ErrConflict) && attempt < 10 {
			if _, err := a.Tenant(ctx, name); err != nil {
				return err // deleted meanwhile
			}
			continue
		}
		if err != nil {
			return err
		}
		a.forget(hashes)
		a.mu.Lock()
		delete(a.tenants, name)
		a.announce()
		a.mu.Unlock()
		return nil
	}
}

// maxTxnTokens is how many tokens DeleteTenant deletes in one transaction
// (etcd's --max-txn-ops is 128 by default).
const maxTxnTokens = 100

// forget revokes deleted tokens in the cache at once (the watch would too).
func (a *Auth) forget(hashes []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for _, h := range hashes {
		a.revoke(h, now)
	}
}

// CreateToken issues a token and returns it with its secret, which is not
// kept anywhere: show it once. A tenant's tokens are counted in etcd and
// the token written in one transaction that checks no token was issued
// since, so MaxTokensPerTenant holds however many ask at once.
func (a *Auth) CreateToken(ctx context.Context, t models.Token) (models.Token, string, error) {
	if err := t.Validate(); err != nil {
		return t, "", err
	}
	if t.Tenant != "" {
		if _, err := a.Tenant(ctx, t.Tenant); err != nil {
			return t, "", err
		}
	}
	secret, h, err := newSecret()
	if err != nil {
		return t, "", err
	}
	t.ID, t.Created = h[:16], time.Now().UTC()
	data, err := json.Marshal(t)
	if err != nil {
		return t, "", err
	}
	for attempt := 0; ; attempt++ {
		var cmps []clientv3.Cmp
		if t.Tenant != "" {
			kvs, rev, err := a.store.List(ctx, store.KeyTokens, 0)
			if err != nil {
				return t, "", err
			}
			n := 0
			for _, kv := range kvs {
				var other models.Token
				if json.Unmarshal(kv.Value, &other) == nil && other.Tenant == t.Tenant {
					n++
				}
			}
			if n >= MaxTokensPerTenant {
				return t, "", fmt.Errorf("%w: tenant %s holds %d tokens, the most it may; revoke one first", ErrTooManyTokens, t.Tenant, n)
			}
			cmps = append(cmps,
				// Only while the tenant exists: a token issued beside its
				// deletion must not outlive it.
				clientv3.Compare(clientv3.Version(store.KeyTenants+string(t.Tenant)), ">", 0),
				// No token issued since the count.
				clientv3.Compare(clientv3.CreateRevision(store.KeyTokens), "<", rev+1).WithPrefix())
		}
		err = a.store.Txn(ctx, cmps, []clientv3.Op{clientv3.OpPut(store.KeyTokens+h, string(data))})
		if errors.Is(err, store.ErrConflict) {
			if _, terr := a.Tenant(ctx, t.Tenant); terr != nil {
				return t, "", terr // the tenant went
			}
			if attempt < 50 {
				continue // another token was issued meanwhile: count again
			}
		}
		if err != nil {
			return t, "", err
		}
		break
	}
	a.mu.Lock()
	a.tokens[h] = t
	a.mu.Unlock()
	return t, secret, nil
}

// Tokens lists tokens (never their secrets), oldest first.
func (a *Auth) Tokens() []models.Token {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.SortedFunc(maps.Values(a.tokens), func(x, y models.Token) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
}

// DeleteToken revokes a token by ID (the first 16 hex digits of its hash,
// so the key is found by prefix). The last operator token is not revoked
// (ErrLastOperator): nobody could then manage the controller, short of
// `accelnet token create` by whoever holds the data directory or etcd's
// credentials. The check and the delete are one transaction: of two
// operators revoking each other's tokens at once, one is refused.
func (a *Auth) DeleteToken(ctx context.Context, id string) error {
	if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: token %q", store.ErrNotFound, id)
	}
	for attempt := 0; ; attempt++ {
		kvs, _, err := a.store.List(ctx, store.KeyTokens, 0)
		if err != nil {
			return err
		}
		var victim string
		var victimOperator bool
		var otherOperator string
		for _, kv := range kvs {
			var t models.Token
			if json.Unmarshal(kv.Value, &t) != nil {
				continue
			}
			if strings.HasPrefix(strings.TrimPrefix(kv.Key, store.KeyTokens), id) {
				victim, victimOperator = kv.Key, t.Role == models.RoleOperator && t.Tenant == ""
			} else if t.Role == models.RoleOperator && t.Tenant == "" {
				otherOperator = kv.Key
			}
		}
		if victim == "" {
			return fmt.Errorf("%w: token %q", store.ErrNotFound, id)
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.Version(victim), ">", 0)}
		if victimOperator {
			if otherOperator == "" {
				return fmt.Errorf("%w: token %s is the only operator token; issue another first (POST /tokens with role operator)", ErrLastOperator, id)
			}
			// Another operator token is still there when this one goes.
			cmps = append(cmps, clientv3.Compare(clientv3.Version(otherOperator), ">", 0))
		}
		err = a.store.Txn(ctx, cmps, []clientv3.Op{clientv3.OpDelete(victim)})
		if errors.Is(err, store.ErrConflict) && attempt < 20 {
			continue
		}
		if err != nil {
			return err
		}
		a.forget([]string{strings.TrimPrefix(victim, store.KeyTokens)})
		return nil
	}
}

// BootstrapOperator issues the first operator token once per etcd: on the
// first start it writes the secret to path (mode 0600) and returns it; on
// later starts it returns "". Replicas starting together issue one token.
// given, if set, is the secret to register (a deployment's, kept in its
// own secret store: nothing is written then).
func (a *Auth) BootstrapOperator(ctx context.Context, path, given string) (string, error) {
	secret, h, err := newSecret()
	if err != nil {
		return "", err
	}
	if given != "" {
		if !ValidSecret(given) {
			return "", fmt.Errorf("the operator token given is not a token (%q and 43 characters of base64url: accelnet certs --kubernetes makes one)", tokenPrefix)
		}
		secret, h, path = given, hashSecret(given), ""
	}
	t := models.Token{ID: h[:16], Role: models.RoleOperator, Created: time.Now().UTC()}
	data, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	first := clientv3.Compare(clientv3.CreateRevision(store.KeyBootstrap), "=", 0)
	err = a.store.Txn(ctx, []clientv3.Cmp{first}, []clientv3.Op{
		clientv3.OpPut(store.KeyBootstrap, t.ID), clientv3.OpPut(store.KeyTokens+h, string(data)),
	})
	if errors.Is(err, store.ErrConflict) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.tokens[h] = t
	a.mu.Unlock()
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return secret, err
		}
		if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
			return secret, fmt.Errorf("write operator token: %w", err)
		}
	}
	return secret, nil
}
