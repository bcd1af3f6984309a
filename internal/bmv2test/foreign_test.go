package bmv2test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/southbound"
	"github.com/accelnet/accelnet/southbound/p4"
)

// TestBMv2ForeignController: another controller (not one of accelnet's
// replicas) takes leaf1, a BMv2, with a higher election ID and deletes a
// route. accelnet says so at once (leaf1's status, without waiting for a
// periodic look) and keeps the rest of the fabric; once the other
// controller leaves, leaf1 is accelnet's again with the route back.
func TestBMv2ForeignController(t *testing.T) {
	bin, why := SimpleSwitch()
	if bin == "" {
		t.Skip(why)
	}
	_, topo, h := labFabric(t, bin, (*Lab).Host, nil)
	schema, err := p4.LoadSchema()
	if err != nil {
		t.Fatal(err)
	}
	other := southbound.NewP4RT(schema, southbound.P4RTOptions{ElectionID: h.Leadership.Term().ID + 1000, Resolve: func(id models.SwitchID) (models.Switch, error) {
		for _, s := range topo.Switches {
			if s.Name == id {
				return s, nil
			}
		}
		return models.Switch{}, fmt.Errorf("no switch %s", id)
	}})
	ctx := Context(t)
	st, err := other.Read(ctx, "leaf1")
	if err != nil || len(st.Routes) == 0 {
		other.Close()
		t.Fatalf("the other controller reads leaf1: %d routes, %v", len(st.Routes), err)
	}
	if err := other.Apply(context.Background(), "leaf1", models.Diff{Delete: models.ForwardingState{Routes: st.Routes[:1]}}); err != nil {
		other.Close()
		t.Fatalf("the other controller's delete: %v", err)
	}
	h.Eventually(t, time.Minute, "leaf1 reported as held by another controller", func() bool {
		return strings.Contains(h.Controller.Status()["leaf1"].LastError, "another controller")
	})
	if !h.Controller.Status()["leaf2"].InSync {
		t.Errorf("leaf2 out of sync while another controller holds leaf1: %+v", h.Controller.Status()["leaf2"])
	}
	other.Close()
	h.Eventually(t, 2*time.Minute, "leaf1 accelnet's again, its route back", func() bool {
		if !h.Controller.Status()["leaf1"].InSync {
			return false
		}
		back, err := h.Driver.Read(ctx, "leaf1")
		return err == nil && len(back.Routes) == len(st.Routes)
	})
}
