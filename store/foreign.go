package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
)

// Foreign keeps, under KeyForeign, the switches another controller took
// from the leader: written by the leader, fenced by its term, so that
// every replica can tell its event subscribers.
type Foreign struct{ s *Store }

// Foreign returns the switches taken by another controller.
func (s *Store) Foreign() *Foreign { return &Foreign{s: s} }

// Put records that rec.Switch was taken, if fence (the leader's term)
// holds.
func (f *Foreign) Put(ctx context.Context, fence clientv3.Cmp, rec models.ForeignPrimary) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode the foreign primary of %s: %w", rec.Switch, err)
	}
	return f.s.Txn(ctx, []clientv3.Cmp{fence}, []clientv3.Op{clientv3.OpPut(KeyForeign+string(rec.Switch), string(data))})
}

// Delete records that sw is the leader's again, if fence holds.
func (f *Foreign) Delete(ctx context.Context, fence clientv3.Cmp, sw models.SwitchID) error {
	return f.s.Txn(ctx, []clientv3.Cmp{fence}, []clientv3.Op{clientv3.OpDelete(KeyForeign + string(sw))})
}

// Load reads every switch recorded as taken. A record that does not
// decode counts as taken, with nothing more known.
func (f *Foreign) Load(ctx context.Context) (map[models.SwitchID]models.ForeignPrimary, error) {
	kvs, _, err := f.s.List(ctx, KeyForeign, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[models.SwitchID]models.ForeignPrimary, len(kvs))
	for _, kv := range kvs {
		sw := models.SwitchID(strings.TrimPrefix(kv.Key, KeyForeign))
		var rec models.ForeignPrimary
		_ = json.Unmarshal(kv.Value, &rec)
		rec.Switch = sw
		out[sw] = rec
	}
	return out, nil
}
