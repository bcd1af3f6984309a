// Package store is accelnet's view of etcd: the key schema below, the
// transactions and watches every other part uses, and the embedded etcd
// server of `accelnet demo` and the tests.
//
// # Keys in etcd
//
// Everything lives under one versioned prefix, /accelnet/v1/:
//
//	/accelnet/v1/topology   the topology's head: JSON {format, name, parts},
//	                        the parts' keys in order; replaced in one small
//	                        transaction once its parts are stored, so a
//	                        reader (head and parts at one revision) never
//	                        sees half a change. Watchers watch this key.
//	fabric/<s|l|h>-<sha256> a run of switches, links or hosts (JSON
//	                        models.Topology with that list only), at most
//	                        256 KiB: a k=32 fat-tree (2.3 MB) fits under
//	                        etcd's 1.5 MiB request limit; named by content,
//	                        so a changed link writes one part
//	locks/topology          serializes topology writers (etcd mutex)
//	intents/<tenant>/<id>   JSON models.Intent, spec and status; its mod
//	                        revision is the API's ETag
//	idempotency/<tenant>/<sha256 of key>  which intent an Idempotency-Key made
//	tenants/<name>          JSON models.Tenant with its quotas
//	tokens/<sha256 of secret>  JSON models.Token (never the secret)
//	drains/<id>             JSON models.Drain
//	bootstrap               set once with the first operator token
//	handover/<switch>       JSON models.SwitchMark: what the leader's term
//	                        confirmed the switch holds, removed before each
//	                        write to it (controller/handover.go)
//	leader/<lease ID hex>   a replica's candidacy, its API URL, bound to
//	                        its session lease (see Leadership)
//
// Keys and their JSON stay backward compatible once released: fields are
// only added.
package store

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// Prefix is the root of every accelnet key.
const Prefix = "/accelnet/v1/"

const (
	// KeyTopology holds the fabric's desired topology.
	KeyTopology = Prefix + "topology"
	// KeyTenants holds one models.Tenant per key: tenants/<name>.
	KeyTenants = Prefix + "tenants/"
	// KeyTokens holds one models.Token per key: tokens/<sha256 of the
	// secret, hex>. The secret itself is never stored.
	KeyTokens = Prefix + "tokens/"
	// KeyBootstrap records that the first operator token was issued.
	KeyBootstrap = Prefix + "bootstrap"
	// KeyIntents holds one models.Intent (spec and status) per key:
	// intents/<tenant>/<id>. The key's mod revision is the intent's ETag.
	KeyIntents = Prefix + "intents/"
	// KeyIdempotency maps a tenant's Idempotency-Key to the intent it
	// created: idempotency/<tenant>/<sha256 of the key> → JSON {id, digest of the request body}.
	KeyIdempotency = Prefix + "idempotency/"
	// KeyDrains holds one models.Drain per key: drains/<id>.
	KeyDrains = Prefix + "drains/"
	// KeyHandover holds one models.SwitchMark per switch:
	// handover/<switch>. A new term takes a switch whose mark matches
	// what it computes as the previous term left it.
	KeyHandover = Prefix + "handover/"
	// KeyForeign holds one models.ForeignPrimary per switch that
	// another controller (not one of accelnet's replicas) took, as the
	// leader saw it: foreign/<switch>; deleted once the leader is primary
	// there again. Every replica's /api/v1/events follows it.
	KeyForeign = Prefix + "foreign/"
	// KeyHostMACs holds the MAC the leader learned from each host's ARP:
	// hostmacs/<host> → JSON {mac, learned}. Every replica follows it.
	KeyHostMACs = Prefix + "hostmacs/"
	// KeyElection is the prefix replicas campaign under: each candidate's key
	// is KeyElection/<lease ID in hex>, bound to its session's lease, with the
	// replica's API URL as its value. The oldest key leads.
	KeyElection = Prefix + "leader"
)

// NewID names a new intent or drain: the creation time in milliseconds
// (hex, so keys list oldest first) and 32 random bits.
func NewID(now time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%011x%08x", uint64(now.UnixMilli()), binary.BigEndian.Uint32(r[:]))
}
