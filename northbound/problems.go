package northbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/accelnet/accelnet/api"
	"github.com/accelnet/accelnet/controller"
	"github.com/accelnet/accelnet/election"
	"github.com/accelnet/accelnet/intents"
	"github.com/accelnet/accelnet/internal/strictjson"
	"github.com/accelnet/accelnet/models"
	"github.com/accelnet/accelnet/store"
	"github.com/accelnet/accelnet/tenancy"
	"github.com/gin-gonic/gin"
)

func problem(c *gin.Context, status int, detail string) {
	writeProblem(c, api.Problem{Status: status, Detail: detail})
}

// completed is p with its type and title filled in.
func completed(p api.Problem) api.Problem {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	p.Title = http.StatusText(p.Status)
	return p
}

func writeProblem(c *gin.Context, p api.Problem) {
	p = completed(p)
	body, err := json.Marshal(p)
	if err != nil {
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	c.Abort()
	c.Data(p.Status, "application/problem+json", body)
}

// fail maps an error to its HTTP status and a problem document.
func fail(c *gin.Context, err error) {
	p, retryAfter := problemOf(err)
	if retryAfter != "" {
		c.Header("Retry-After", retryAfter)
	}
	writeProblem(c, p)
}

// problemOf maps an error to its problem document (status included) and
// the Retry-After it calls for, if any: once, here, for whole requests
// and for each item of a batch.
func problemOf(err error) (p api.Problem, retryAfter string) {
	var v *models.ValidationError
	var refused *intents.RefusedError
	var item *intents.ItemError
	if errors.As(err, &item) {
		p, retryAfter = problemOf(item.Err)
		p.Detail = fmt.Sprintf("items[%d]: %s", item.Index, p.Detail)
		p.Index = &item.Index
		return p, retryAfter
	}
	switch {
	case errors.As(err, &v):
		return api.Problem{Status: http.StatusUnprocessableEntity, Detail: "the request is not valid", Errors: v.Errors}, ""
	case errors.Is(err, models.ErrInvalid):
		return api.Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error()}, ""
	case errors.Is(err, store.ErrNotFound):
		return api.Problem{Status: http.StatusNotFound, Detail: err.Error()}, ""
	case errors.Is(err, intents.ErrQuota), errors.Is(err, intents.ErrHostNotAllowed):
		return api.Problem{Status: http.StatusForbidden, Detail: err.Error()}, ""
	case errors.Is(err, intents.ErrPrecondition):
		return api.Problem{Status: http.StatusPreconditionFailed, Detail: err.Error()}, ""
	case errors.Is(err, intents.ErrIdempotencyReuse):
		return api.Problem{Status: http.StatusUnprocessableEntity, Detail: err.Error()}, ""
	case errors.Is(err, controller.ErrAlreadyDrained), errors.Is(err, tenancy.ErrTooManyTokens),
		errors.Is(err, tenancy.ErrHostHeld), errors.Is(err, tenancy.ErrLastOperator):
		return api.Problem{Status: http.StatusConflict, Detail: err.Error()}, ""
	case errors.As(err, &refused):
		p := api.Problem{Status: http.StatusConflict, Detail: err.Error(), Intent: refused.Intent}
		if refused.Fit.Bottleneck != "" {
			p.Bottleneck, p.FreeGbps = refused.Fit.Bottleneck, &refused.Fit.FreeGbps
		}
		return p, ""
	case errors.Is(err, election.ErrNotLeader):
		return api.Problem{Status: http.StatusServiceUnavailable, Detail: "this replica stopped leading while the request waited (a failover): nothing was done; retry in a second"}, "1"
	case errors.Is(err, store.ErrNoTopology), errors.Is(err, store.ErrStoreUnavailable),
		errors.Is(err, store.ErrConflict), errors.Is(err, context.DeadlineExceeded):
		return api.Problem{Status: http.StatusServiceUnavailable, Detail: "the controller cannot serve this now: " + err.Error()}, "2"
	default:
		return api.Problem{Status: http.StatusInternalServerError, Detail: err.Error()}, ""
	}
}

// maxBody bounds a request body; an intent is a few hundred bytes.
const maxBody = 1 << 20

// decodeStrict reads a JSON body into v, refusing unknown fields, keys in
// another case or given twice (checkKeys), and trailing data, with a
// message that says where the problem is.
func decodeStrict(c *gin.Context, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		writeProblem(c, bodyReadProblem(err))
		return false
	}
	if p, ok := decodeJSON(body, v); !ok {
		writeProblem(c, p)
		return false
	}
	return true
}

// bodyReadProblem says why a body could not be read: too large (413),
// not sent in time (408: the server's read timeout), or cut off (400).
func bodyReadProblem(err error) api.Problem {
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		return api.Problem{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf("body over %d bytes", tooLarge.Limit)}
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return api.Problem{Status: http.StatusRequestTimeout, Detail: "the body did not arrive in time: send it at once, after the headers"}
	}
	return api.Problem{Status: http.StatusBadRequest, Detail: "the body could not be read: " + err.Error()}
}

// decodeJSON decodes body into v as decodeStrict does, or says why not.
func decodeJSON(body []byte, v any) (api.Problem, bool) {
	err := strictjson.Decode(body, v)
	if err == nil {
		return api.Problem{}, true
	}
	detail := "malformed JSON: " + err.Error()
	var field string
	var typeErr *json.UnmarshalTypeError
	var keyErr *strictjson.KeyError
	switch {
	case errors.As(err, &typeErr):
		field = strings.TrimPrefix(typeErr.Field, "IntentSpec.") // embedded in api.IntentRequest
		detail = fmt.Sprintf("field %q: want %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &keyErr):
		field = keyErr.Path
	}
	p := api.Problem{Status: http.StatusBadRequest, Detail: detail}
	if field != "" {
		p.Errors = []models.FieldError{{Field: field, Message: detail}}
	}
	return p, false
}

func boolQuery(c *gin.Context, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &models.ValidationError{Errors: []models.FieldError{{Field: name, Message: "want true or false"}}}
	}
	return b, nil
}

func setETag(c *gin.Context, rev int64) { c.Header("ETag", `"`+strconv.FormatInt(rev, 10)+`"`) }
