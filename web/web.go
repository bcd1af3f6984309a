// Package web is the dashboard: static assets embedded in the binary, served
// by the controller at /. The page draws the fabric in tiers (cores and
// spines on top, leaves, hosts) and follows /api/v1/stream for live load;
// signed in with a token, it lists the intents the token may see, follows
// their events, and highlights a selected intent's paths.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the dashboard's files.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.FileServerFS(sub)
}
