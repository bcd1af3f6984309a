// Package api holds every request and response body of accelnet's REST
// API, shared by the server (northbound) and its clients (accelnetctl, tests).
// It imports only models, so a client links no etcd, gRPC or gin.
package api
