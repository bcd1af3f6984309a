package api

import "github.com/accelnet/accelnet/models"

// TenantView is a tenant with what it has reserved.
type TenantView struct {
	models.Tenant
	ReservedGbps float64 `json:"reserved_gbps"`
	LiveIntents  int     `json:"live_intents"`
}

// TokenRequest asks for a token.
type TokenRequest struct {
	Tenant models.TenantName `json:"tenant,omitempty"`
	Role   models.TokenRole  `json:"role"`
}

// NewTokenView is a new token with its secret, shown only this once.
type NewTokenView struct {
	models.Token
	Secret string `json:"token"`
}
