package northbound

import (
	"net/http"
	"time"

	"github.com/accelnet/accelnet/models"
	"github.com/gin-gonic/gin"
)

func (a *server) createDrain(c *gin.Context) {
	var d models.Drain
	if !decodeStrict(c, &d) {
		return
	}
	d.ID, d.Created = "", time.Time{}
	dry, err := boolQuery(c, "dryRun")
	if err != nil {
		fail(c, err)
		return
	}
	if dry {
		p, err := a.opts.Drains.Preview(d)
		if err != nil {
			fail(c, err)
			return
		}
		if p.Degraded == nil {
			p.Degraded = []string{}
		}
		c.JSON(http.StatusOK, p)
		return
	}
	saved, err := a.opts.Drains.Create(c.Request.Context(), d)
	if err != nil {
		fail(c, err)
		return
	}
	v, err := a.opts.Drains.Get(saved.ID)
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/drains/"+saved.ID)
	c.JSON(http.StatusCreated, v)
}

func (a *server) listDrains(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"items": a.opts.Drains.List()})
}

func (a *server) getDrain(c *gin.Context) {
	v, err := a.opts.Drains.Get(c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (a *server) deleteDrain(c *gin.Context) {
	if err := a.opts.Drains.Delete(c.Request.Context(), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
