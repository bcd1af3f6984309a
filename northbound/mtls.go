package northbound

import (
	"encoding/json"
	"net/http"

	"github.com/accelnet/accelnet/api"
)

// RequireClientCert serves only requests that presented a verified client
// certificate, except the health and readiness probes (which kubelets and
// load balancers send without one). Pair it with a TLS server that asks
// for certificates but lets the handshake through without one
// (tls.VerifyClientCertIfGiven), so the refusal is a clear 401 instead of
// a failed handshake.
func RequireClientCert(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || (r.TLS != nil && len(r.TLS.VerifiedChains) > 0) {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := json.Marshal(api.Problem{Type: "about:blank", Title: http.StatusText(http.StatusUnauthorized), Status: http.StatusUnauthorized,
			Detail: "this server requires a client certificate signed by its client CA (mutual TLS)"})
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(body)
	})
}
