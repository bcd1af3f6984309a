package api

import "github.com/accelnet/accelnet/models"

// IntentRequest is the body of POST /intents: the spec plus, for an
// operator acting for a tenant, the tenant.
type IntentRequest struct {
	Tenant models.TenantName `json:"tenant,omitempty"`
	models.IntentSpec
}

// DryRunView answers ?dryRun=true.
type DryRunView struct {
	Fits       bool                `json:"fits"`
	Paths      [][]models.Endpoint `json:"paths"`
	MLU        float64             `json:"mlu"`
	Bottleneck string              `json:"bottleneck,omitempty"`
	FreeGbps   float64             `json:"free_gbps"`
	Reason     string              `json:"reason,omitempty"`
	Preempts   []string            `json:"preempts,omitempty"`
	// QPHint says how many QPs per connection (source ports) come
	// closest to the best; Hint says it in words.
	QPHint *models.QPHint `json:"qp_hint,omitempty"`
	Hint   string         `json:"hint,omitempty"`
}

// IntentList is a page of intents.
type IntentList struct {
	Items         []models.Intent `json:"items"`
	NextPageToken string          `json:"next_page_token,omitempty"`
}

// Capacity is the bandwidth one more flow from src to dst could reserve.
type Capacity struct {
	Src           string  `json:"src"`
	Dst           string  `json:"dst"`
	AvailableGbps float64 `json:"available_gbps"`
	Bottleneck    string  `json:"bottleneck"`
	Headroom      float64 `json:"headroom"`
	ReservedMLU   float64 `json:"reserved_mlu"`
}

// Event is one change a client can watch: an intent stored or removed, a
// new topology, or (operators only) a switch taken by another controller
// or taken back. Events come from etcd watches, so every replica sees
// every change, whoever made it.
type Event struct {
	// Type is "intent", "intent-removed", "topology", "switch-foreign"
	// (a controller that is not one of accelnet's replicas took Switch's
	// primary role; Message is what the switch said), "switch-primary"
	// (accelnet is primary on Switch again), "synced" (every intent of
	// the current state was sent; Count says how many), or "resync"
	// (events may have been missed: read the state again).
	Type     string            `json:"type"`
	Count    int               `json:"count,omitempty"`
	Revision int64             `json:"revision"`
	Tenant   models.TenantName `json:"tenant,omitempty"`
	ID       string            `json:"id,omitempty"`
	Intent   *models.Intent    `json:"intent,omitempty"`
	Switch   models.SwitchID   `json:"switch,omitempty"`
	Message  string            `json:"message,omitempty"`
}

// DetectedStatus is a detected elephant as the API shows it.
type DetectedStatus struct {
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	SrcPort uint16  `json:"src_port"`
	Gbps    float64 `json:"gbps"`        // measured, or estimated from samples
	Demand  float64 `json:"demand_gbps"` // placed at
	// RateSource says where Gbps comes from: "pin-counter" (a pinned
	// flow's direct counter: exact) or "samples" (sampled packets).
	RateSource string            `json:"rate_source"`
	Leaf       models.SwitchID   `json:"leaf"`
	Pinned     bool              `json:"pinned"`
	Path       []models.Endpoint `json:"path,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	// Intent is the sampled intent (sampled_flows) whose flow it is:
	// pinned on that intent's reserved path.
	Intent string `json:"intent,omitempty"`
}

// IntentBatchRequest asks for many intents of one tenant at once
// (POST /api/v1/intents:batch).
type IntentBatchRequest struct {
	Tenant models.TenantName `json:"tenant,omitempty"`
	// Atomic admits all or none, their flows placed together, in one
	// etcd transaction; otherwise each item is decided on its own.
	Atomic bool                `json:"atomic,omitempty"`
	Items  []models.IntentSpec `json:"items"`
}

// IntentBatchResult answers a batch: one result per item, in order.
type IntentBatchResult struct {
	Items []IntentBatchItem `json:"items"`
	// Created counts the items admitted (201), Failed the others.
	Created int  `json:"created"`
	Failed  int  `json:"failed"`
	DryRun  bool `json:"dry_run,omitempty"`
}

// IntentBatchItem is one item's result: the status it would have had
// as a request of its own, with the intent or a problem document.
type IntentBatchItem struct {
	Status   int            `json:"status"`
	Intent   *models.Intent `json:"intent,omitempty"`
	Replayed bool           `json:"replayed,omitempty"`
	Problem  *Problem       `json:"problem,omitempty"`
}
