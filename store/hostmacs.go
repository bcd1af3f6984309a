package store

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/accelnet/accelnet/models"
)

// HostMACs keeps, under KeyHostMACs, the MACs learned from the hosts'
// ARP (see controller/hosts.go).
type HostMACs struct{ s *Store }

// HostMACs returns the learned host MACs.
func (s *Store) HostMACs() *HostMACs { return &HostMACs{s: s} }

// learned is one host's record.
type learned struct {
	MAC     models.MAC `json:"mac"`
	Learned time.Time  `json:"learned"`
}

// Put records hosts' MACs in one transaction, if every fence condition
// holds (at most etcd's --max-txn-ops of them).
func (h *HostMACs) Put(ctx context.Context, fence []clientv3.Cmp, macs map[string]models.MAC) error {
	now := time.Now().UTC()
	ops := make([]clientv3.Op, 0, len(macs))
	for host, mac := range macs {
		data, err := json.Marshal(learned{MAC: mac, Learned: now})
		if err != nil {
			return err
		}
		ops = append(ops, clientv3.OpPut(KeyHostMACs+host, string(data)))
	}
	return h.s.Txn(ctx, fence, ops)
}

// Follow calls fn with every host's learned MAC, at first and after each
// change, until ctx ends. A record that does not decode is left out.
func (h *HostMACs) Follow(ctx context.Context, fn func(map[string]models.MAC)) error {
	all := map[string]models.MAC{}
	return h.s.Follow(ctx, KeyHostMACs, func(kvs []KV, reset bool) {
		if reset {
			clear(all)
		}
		for _, kv := range kvs {
			host := strings.TrimPrefix(kv.Key, KeyHostMACs)
			var rec learned
			if kv.Deleted || json.Unmarshal(kv.Value, &rec) != nil {
				delete(all, host)
				continue
			}
			all[host] = rec.MAC
		}
		fn(maps.Clone(all))
	})
}
