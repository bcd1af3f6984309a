package northbound

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/gin-gonic/gin"
)

func (a *server) tenantView(t models.Tenant) api.TenantView {
	g, n := a.opts.Intents.Usage(t.Name)
	return api.TenantView{Tenant: t, ReservedGbps: g, LiveIntents: n}
}

func (a *server) putTenant(c *gin.Context) {
	var t models.Tenant
	if !decodeStrict(c, &t) {
		return
	}
	t.Created = time.Time{}
	if err := t.Validate(); err != nil {
		fail(c, err)
		return
	}
	var hosts []string
	if snap, _ := a.opts.Fabric.Snapshot(); snap != nil {
		all := snap.Hosts()
		// A grant or hold that names no host of the fabric would be kept
		// and do nothing.
		if errs := append(models.CheckHostPatterns("hosts", t.Hosts, all), models.CheckHostPatterns("holds", t.Holds, all)...); len(errs) > 0 {
			fail(c, &models.ValidationError{Errors: errs})
			return
		}
		for _, h := range all {
			hosts = append(hosts, h.Name)
		}
	}
	if len(t.Holds) > 0 {
		// Holding a host another tenant's live intents use would leave
		// them in place, to or from a host that is no longer theirs.
		if using := a.opts.Intents.LiveUsing(t.Name, t.HoldsHost); len(using) > 0 {
			problem(c, http.StatusConflict, fmt.Sprintf("the hosts to hold are used by live intents of other tenants (%s): they would stay in place; delete them first, or hold other hosts", describeUsers(using)))
			return
		}
	}
	_, existed := a.opts.Auth.Tenant(c.Request.Context(), t.Name)
	if existed != nil {
		// A new tenant starts empty: not while a deleted one's intents
		// of the same name are still being removed.
		if n := a.opts.Intents.Held(t.Name); n > 0 {
			c.Header("Retry-After", "5")
			problem(c, http.StatusConflict, fmt.Sprintf("tenant %q was deleted and %d of its intents are still being removed; retry in a few seconds", t.Name, n))
			return
		}
	}
	saved, err := a.opts.Auth.PutTenant(c.Request.Context(), t, hosts)
	if err != nil {
		fail(c, err)
		return
	}
	status := http.StatusCreated
	if existed == nil {
		status = http.StatusOK
	}
	c.JSON(status, a.tenantView(saved))
}

func (a *server) listTenants(c *gin.Context) {
	out := []api.TenantView{}
	for _, t := range a.opts.Auth.Tenants() {
		out = append(out, a.tenantView(t))
	}
	c.JSON(http.StatusOK, gin.H{"items": out})
}

func (a *server) getTenant(c *gin.Context) {
	t, err := a.opts.Auth.Tenant(c.Request.Context(), models.TenantName(c.Param("name")))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a.tenantView(t))
}

// deleteTenant deletes a tenant, every token of it (open event streams
// end) and every intent of it (their entries are removed from the
// switches). Should the intents' deletion not finish, the leader's sweep
// of intents without a tenant does.
func (a *server) deleteTenant(c *gin.Context) {
	name := models.TenantName(c.Param("name"))
	if err := a.opts.Auth.DeleteTenant(c.Request.Context(), name); err != nil {
		fail(c, err)
		return
	}
	n, err := a.opts.Intents.DeleteTenant(c.Request.Context(), name)
	if err != nil {
		a.opts.Logger.Warn("tenant deleted; its intents are left to the sweep", "tenant", name, "deleted", n, "err", err)
	}
	c.Status(http.StatusNoContent)
}

func (a *server) createToken(c *gin.Context) {
	var req api.TokenRequest
	if !decodeStrict(c, &req) {
		return
	}
	tok, secret, err := a.opts.Auth.CreateToken(c.Request.Context(), models.Token{Tenant: req.Tenant, Role: req.Role})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = &models.ValidationError{Errors: []models.FieldError{{Field: "tenant", Message: err.Error()}}}
		}
		fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, api.NewTokenView{Token: tok, Secret: secret})
}

func (a *server) listTokens(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"items": a.opts.Auth.Tokens()})
}

func (a *server) deleteToken(c *gin.Context) {
	if err := a.opts.Auth.DeleteToken(c.Request.Context(), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// describeUsers says which tenants have how many live intents ("vision: 3,
// nlp: 1"), by name.
func describeUsers(using map[models.TenantName]int) string {
	names := slices.Sorted(maps.Keys(using))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("tenant %s: %d", n, using[n])
	}
	return strings.Join(parts, ", ")
}
