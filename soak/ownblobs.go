package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// ownBlobs passes the functions' log on and keeps, from its lines, the
// writes that met their shared blob being deleted and kept a blob of
// their own (objects.OwnBlobLog): the only writes the design lets do so.
// The runner writes whole lines (Lambda's JSON log format, as the
// template's LoggingConfig asks); writes may come from several
// goroutines.
type ownBlobs struct {
	next io.Writer

	mu     sync.Mutex
	writes map[string]bool // write ids
}

func newOwnBlobs(next io.Writer) *ownBlobs {
	return &ownBlobs{next: next, writes: map[string]bool{}}
}

func (o *ownBlobs) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(objects.OwnBlobLog)) {
		for line := range bytes.Lines(p) {
			var rec struct {
				Msg     string `json:"msg"`     // slog's key (functions in this process)
				Message string `json:"message"` // Lambda's JSON log format
				WriteID string `json:"writeId"`
			}
			if json.Unmarshal(line, &rec) == nil && (rec.Msg == objects.OwnBlobLog || rec.Message == objects.OwnBlobLog) && rec.WriteID != "" {
				o.mu.Lock()
				o.writes[rec.WriteID] = true
				o.mu.Unlock()
			}
		}
	}
	return o.next.Write(p)
}

// logged reports whether write id id logged that it kept a blob of its
// own, and how many writes did.
func (o *ownBlobs) logged(id string) (bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writes[id], len(o.writes)
}
