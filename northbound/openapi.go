package northbound

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
	"gopkg.in/yaml.v3"
)

// OpenAPIYAML is the API's OpenAPI 3 document, kept in YAML for people
// and served as JSON at /api/v1/openapi.json. Tests validate real
// responses against it.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(OpenAPIYAML, &doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
})

// OpenAPIJSON is the document as JSON.
func OpenAPIJSON() ([]byte, error) { return openAPIJSON() }

func serveOpenAPI(c *gin.Context) {
	doc, err := openAPIJSON()
	if err != nil {
		problem(c, http.StatusInternalServerError, "openapi document: "+err.Error())
		return
	}
	c.Data(http.StatusOK, "application/json", doc)
}
