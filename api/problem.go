package api

import "github.com/accelnet/accelnet/models"

// Problem is an RFC 9457 problem document, with accelnet's extension
// members: field errors, and for a refused intent where it did not fit
// (and the stored Rejected intent).
type Problem struct {
	Type       string              `json:"type"`
	Title      string              `json:"title"`
	Status     int                 `json:"status"`
	Detail     string              `json:"detail,omitempty"`
	Errors     []models.FieldError `json:"errors,omitempty"`
	Bottleneck string              `json:"bottleneck,omitempty"`
	FreeGbps   *float64            `json:"free_gbps,omitempty"`
	Intent     *models.Intent      `json:"intent,omitempty"`
	// Index is the item of a batch the problem is about.
	Index *int `json:"index,omitempty"`
}
