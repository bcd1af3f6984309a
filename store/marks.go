package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
)

// Marks keeps each switch's handover mark (models.SwitchMark) under
// KeyHandover: one small key per switch, so a change is a small write
// and a fabric of any size stays under etcd's request limit.
type Marks struct {
	s      *Store
	maxOps int
}

// Marks returns the switches' handover marks, written at most maxOps
// operations to a transaction (etcd's --max-txn-ops; 128 by default).
func (s *Store) Marks(maxOps int) *Marks {
	if maxOps <= 0 {
		maxOps = 128
	}
	return &Marks{s: s, maxOps: maxOps}
}

// Load reads every switch's mark at one revision. A mark that does not
// decode is left out: its switch is read back in full, as one without.
func (m *Marks) Load(ctx context.Context) (map[models.SwitchID]models.SwitchMark, error) {
	kvs, _, err := m.s.List(ctx, KeyHandover, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[models.SwitchID]models.SwitchMark, len(kvs))
	for _, kv := range kvs {
		var mark models.SwitchMark
		if json.Unmarshal(kv.Value, &mark) != nil || mark.Tables == "" || mark.Pins == "" {
			continue
		}
		out[models.SwitchID(strings.TrimPrefix(kv.Key, KeyHandover))] = mark
	}
	return out, nil
}

// Commit puts marks and deletes those of del, each transaction only if
// fence holds (the writer's term). Past maxOps operations it takes more
// than one transaction; each stands on its own, as marks do.
func (m *Marks) Commit(ctx context.Context, fence clientv3.Cmp, put map[models.SwitchID]models.SwitchMark, del []models.SwitchID) error {
	ops := make([]clientv3.Op, 0, len(put)+len(del))
	for _, sw := range del {
		ops = append(ops, clientv3.OpDelete(KeyHandover+string(sw)))
	}
	for sw, mark := range put {
		data, err := json.Marshal(mark)
		if err != nil {
			return fmt.Errorf("encode the mark of %s: %w", sw, err)
		}
		ops = append(ops, clientv3.OpPut(KeyHandover+string(sw), string(data)))
	}
	for len(ops) > 0 {
		n := min(len(ops), m.maxOps)
		if err := m.s.Txn(ctx, []clientv3.Cmp{fence}, ops[:n]); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}
