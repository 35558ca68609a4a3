package searchproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Bulk actions.
const (
	actIndex  = "index"
	actCreate = "create"
	actDelete = "delete"
	actUpdate = "update"
)

// maxIDBytes is OpenSearch's limit on a document id.
const maxIDBytes = 512

// item is one action of a bulk: what it asks, and what became of it.
type item struct {
	n                int // its position in the bulk
	action           string
	index, id        string
	source           []byte // the line after the action; nil for delete
	external, gte    bool   // version_type external / external_gte
	version          int64
	ifSeqNo, ifPTerm *int64

	err     *apiError // set when the item failed
	result  string    // created, updated, deleted, not_found
	status  int
	after   docState // the document's state once the item applied
	engine  json.RawMessage
	seqNo   int64
	skipped bool // decided against before the engine saw it
}

func (it *item) key() docKey { return docKey{it.index, it.id} }

// bulkMeta is an action line's metadata; any other field is refused, as
// OpenSearch refuses it.
type bulkMeta struct {
	Index            string          `json:"_index"`
	ID               *string         `json:"_id"`
	Version          *int64          `json:"version"`
	VersionType      string          `json:"version_type"`
	IfSeqNo          *int64          `json:"if_seq_no"`
	IfPrimaryTerm    *int64          `json:"if_primary_term"`
	Routing          string          `json:"routing"`
	Pipeline         string          `json:"pipeline"`
	RequireAlias     bool            `json:"require_alias"`
	RetryOnConflict  int             `json:"retry_on_conflict"`
	Source           json.RawMessage `json:"_source"`
	DynamicTemplates json.RawMessage `json:"dynamic_templates"`
}

func malformed(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "illegal_argument_exception", format, args...)
}

func invalid(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, "action_request_validation_exception", "Validation Failed: 1: "+format+";", args...)
}

// parseBulk reads a bulk body (NDJSON: an action line, then a source line
// for index, create and update) as OpenSearch does, refusing the whole
// request when it is malformed. A source that is not a JSON object fails
// its item only (mapper_parsing_exception).
func parseBulk(body []byte, defaultIndex string) ([]*item, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, invalid("no requests added")
	}
	if body[len(body)-1] != '\n' {
		return nil, malformed("The bulk request must be terminated by a newline [\\n]")
	}
	lines := bytes.Split(body[:len(body)-1], []byte("\n"))
	var items []*item
	for i := 0; i < len(lines); i++ {
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 {
			continue
		}
		it, apiErr := parseAction(line, i+1, defaultIndex)
		if apiErr != nil {
			return nil, apiErr
		}
		if it.action != actDelete {
			if i+1 >= len(lines) {
				return nil, invalid("source is missing")
			}
			i++
			it.source = bytes.TrimSpace(lines[i])
			if !isJSONObject(it.source) {
				it.err = errorf(http.StatusBadRequest, "mapper_parsing_exception", "failed to parse: the source of item [%d] is not a JSON object", len(items))
			}
		}
		it.n = len(items)
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, invalid("no requests added")
	}
	return items, nil
}

func isJSONObject(b []byte) bool { return len(b) > 0 && b[0] == '{' && json.Valid(b) }

func parseAction(line []byte, n int, defaultIndex string) (*item, *apiError) {
	var action map[string]json.RawMessage
	if err := json.Unmarshal(line, &action); err != nil || action == nil {
		return nil, malformed("Malformed action/metadata line [%d], expected START_OBJECT or END_OBJECT but found [%s]", n, firstToken(line))
	}
	if len(action) != 1 {
		return nil, malformed("Malformed action/metadata line [%d], expected one action but found %d", n, len(action))
	}
	it := &item{}
	var raw json.RawMessage
	for it.action, raw = range action {
	}
	switch it.action {
	case actIndex, actCreate, actDelete, actUpdate:
	default:
		return nil, malformed("Malformed action/metadata line [%d], expected field [create], [delete], [index] or [update] but found [%s]", n, it.action)
	}
	var meta bulkMeta
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, malformed("Action/metadata line [%d] contains an unknown parameter [%s]", n, strings.Trim(name, `"`))
		}
		return nil, malformed("Malformed action/metadata line [%d]: %v", n, err)
	}
	it.index = meta.Index
	if it.index == "" {
		it.index = defaultIndex
	}
	if it.index == "" {
		return nil, invalid("index is missing")
	}
	if meta.ID != nil {
		it.id = *meta.ID
	}
	if it.id == "" {
		if it.action == actDelete || it.action == actUpdate {
			return nil, invalid("id is missing")
		}
		it.id = newID()
	}
	if len(it.id) > maxIDBytes {
		return nil, invalid("id [%s] is too long, must be no longer than 512 bytes but was: %d", it.id, len(it.id))
	}
	switch meta.VersionType {
	case "", "internal":
		if meta.Version != nil {
			return nil, invalid("internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead")
		}
	case "external", "external_gt", "external_gte":
		if meta.Version == nil {
			return nil, invalid("an external version is required with version_type [%s]", meta.VersionType)
		}
		if *meta.Version < 0 {
			return nil, invalid("illegal version value [%d] for version type [%s]", *meta.Version, meta.VersionType)
		}
		if it.action == actUpdate {
			return nil, invalid("can't provide version in an update request with version_type [%s]", meta.VersionType)
		}
		it.external, it.gte, it.version = true, meta.VersionType == "external_gte", *meta.Version
	default:
		return nil, malformed("No version type match [%s]", meta.VersionType)
	}
	it.ifSeqNo, it.ifPTerm = meta.IfSeqNo, meta.IfPrimaryTerm
	return it, nil
}

func firstToken(line []byte) string {
	if len(line) > 20 {
		line = line[:20]
	}
	return string(line)
}

// newID makes an id for a document indexed without one, as OpenSearch does.
func newID() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// bulk serves POST /_bulk and /{index}/_bulk.
func (p *Proxy) bulk(w http.ResponseWriter, r *http.Request, defaultIndex string) *apiError {
	began := time.Now()
	body, apiErr := p.readBody(r)
	if apiErr != nil {
		return apiErr
	}
	items, apiErr := parseBulk(body, defaultIndex)
	if apiErr != nil {
		if !p.on(StrictBulk) {
			return p.forwardBody(w, r, "/es/_bulk", body)
		}
		return apiErr
	}
	if apiErr := p.apply(r.Context(), items, refreshParam(r.URL.Query())); apiErr != nil {
		return apiErr
	}
	resp := bulkResponse{Took: time.Since(began).Milliseconds(), Items: make([]map[string]any, len(items))}
	for i, it := range items {
		resp.Items[i] = map[string]any{it.action: it.response()}
		resp.Errors = resp.Errors || it.err != nil
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

type bulkResponse struct {
	Took   int64            `json:"took"`
	Errors bool             `json:"errors"`
	Items  []map[string]any `json:"items"`
}

// forwardBody sends a body already read to the engine as it is.
func (p *Proxy) forwardBody(w http.ResponseWriter, r *http.Request, path string, body []byte) *apiError {
	r.Body = io.NopCloser(bytes.NewReader(body))
	return p.forward(w, r, path, r.URL.RawQuery)
}

// itemResponse is an item's entry in a bulk response (and, without
// Status, a single document write's answer).
type itemResponse struct {
	Index       string         `json:"_index"`
	ID          string         `json:"_id"`
	Version     int64          `json:"_version,omitempty"`
	Result      string         `json:"result,omitempty"`
	Shards      map[string]int `json:"_shards,omitempty"`
	SeqNo       *int64         `json:"_seq_no,omitempty"`
	PrimaryTerm int            `json:"_primary_term,omitempty"`
	Status      int            `json:"status,omitempty"`
	Error       *cause         `json:"error,omitempty"`
}

// response is the item's entry in a bulk response: the proxy's, or with
// versions off the engine's own.
func (it *item) response() any {
	r := itemResponse{Index: it.index, ID: it.id}
	if it.err != nil {
		r.Status = it.err.Status
		c := it.err.cause()
		if c.Index == "" {
			c.Index, c.Shard, c.IndexUUID = it.index, "0", indexUUID(it.index)
		}
		r.Error = &c
		return r
	}
	if it.result == "" && it.engine != nil {
		var raw map[string]any
		if json.Unmarshal(it.engine, &raw) == nil {
			raw["_index"], raw["_id"] = it.index, it.id
			return raw
		}
	}
	seq := it.seqNo
	r.Version, r.Result, r.Shards, r.SeqNo, r.PrimaryTerm, r.Status = it.after.Version, it.result, shards(), &seq, 1, it.status
	return r
}

// apply runs the items: resolves aliases, takes their ids' locks, decides
// each against the versions, sends the engine what it must do, and records
// the versions of what the engine did.
func (p *Proxy) apply(ctx context.Context, items []*item, refresh bool) *apiError {
	keys := make([]docKey, 0, len(items))
	for _, it := range items {
		if it.err == nil {
			index, apiErr := p.writeIndex(it.index)
			if apiErr != nil {
				it.err = apiErr
			} else {
				it.index = index
			}
			if fields := p.state.strictFields(it.index); it.err == nil && fields != nil && p.on(StrictMapping) && (it.action == actIndex || it.action == actCreate) {
				it.err = checkStrict(fields, it.source, it.index)
			}
		}
		keys = append(keys, it.key())
	}
	unlock := p.state.lock(keys)
	defer unlock()

	p.decide(items)
	applied := false
	failed := map[docKey]*apiError{}
	for _, round := range p.rounds(items) {
		// A document whose item failed gets none of its later items.
		sendable := round[:0:0]
		for _, it := range round {
			if cause, ok := failed[it.key()]; ok {
				it.err = cause
				continue
			}
			sendable = append(sendable, it)
		}
		if p.on(OrderedBulk) {
			p.awaitFlushed(ctx, sendable)
		}
		sentAt := time.Now()
		if apiErr := p.send(ctx, sendable, applied); apiErr != nil {
			return apiErr
		}
		applied = true
		for _, it := range sendable {
			if it.err != nil {
				failed[it.key()] = it.err
			} else {
				p.unflushed.add(it.key(), pendingWrite{at: sentAt, deleted: it.action == actDelete, ownTimestamp: bytes.Contains(it.source, []byte(`"@timestamp"`))})
			}
		}
	}
	if err := p.record(items); err != nil {
		return errorf(http.StatusInternalServerError, "exception", "%v", err)
	}
	if refresh && p.on(Refresh) {
		p.awaitSearchable(ctx, items)
	}
	return nil
}

// decide judges each item in order against its document's state (as the
// items before it in the bulk leave it), as OpenSearch's versioning does.
func (p *Proxy) decide(items []*item) {
	pending := map[docKey]docState{}
	known := map[docKey]bool{}
	for _, it := range items {
		k := it.key()
		if _, ok := known[k]; !ok {
			pending[k], known[k] = p.state.doc(k)
		}
		if it.err != nil {
			it.skipped = true
			continue
		}
		if !p.on(ExternalVersions) {
			continue
		}
		st, exists := pending[k], known[k]
		if it.err = judge(it, st, exists); it.err != nil {
			it.skipped = true
			continue
		}
		pending[k], known[k] = it.after, true
	}
}

// judge decides one item against the document's state, setting its result,
// status and the state it leaves; or returns why OpenSearch would refuse it.
func judge(it *item, st docState, exists bool) *apiError {
	live := exists && !st.Deleted
	conflict := func(format string, args ...any) *apiError {
		e := errorf(http.StatusConflict, "version_conflict_engine_exception", "[%s]: version conflict, "+format, append([]any{it.id}, args...)...)
		e.Index = it.index
		return e
	}
	if it.ifSeqNo != nil || it.ifPTerm != nil {
		seq, term := int64(-2), int64(0)
		if it.ifSeqNo != nil {
			seq = *it.ifSeqNo
		}
		if it.ifPTerm != nil {
			term = *it.ifPTerm
		}
		if !live {
			return conflict("required seqNo [%d], primary term [%d]. but no document was found", seq, term)
		}
		if seq != st.SeqNo || term != 1 {
			return conflict("required seqNo [%d], primary term [%d]. current document has seqNo [%d] and primary term [1]", seq, term, st.SeqNo)
		}
	}
	next := int64(1)
	if exists {
		next = st.Version + 1
	}
	if it.external {
		if exists && (it.version < st.Version || it.version == st.Version && !it.gte) {
			if it.gte {
				return conflict("current version [%d] is higher than the one provided [%d]", st.Version, it.version)
			}
			return conflict("current version [%d] is higher or equal to the one provided [%d]", st.Version, it.version)
		}
		next = it.version
	}
	switch it.action {
	case actCreate:
		if live {
			return conflict("document already exists (current version [%d])", st.Version)
		}
		it.result, it.status = "created", http.StatusCreated
	case actIndex:
		it.result, it.status = "created", http.StatusCreated
		if live {
			it.result, it.status = "updated", http.StatusOK
		}
	case actUpdate:
		if !live {
			e := errorf(http.StatusNotFound, "document_missing_exception", "[%s]: document missing", it.id)
			e.Index = it.index
			return e
		}
		it.result, it.status = "updated", http.StatusOK
	case actDelete:
		it.result, it.status = "not_found", http.StatusNotFound
		if live {
			it.result, it.status = "deleted", http.StatusOK
		}
		it.after = docState{Version: next, Deleted: true}
		return nil
	}
	it.after = docState{Version: next}
	return nil
}

// byDocument groups the items not skipped by document, each document's
// in the bulk's order, the documents in the order they first appear.
func byDocument(items []*item) (order []docKey, perKey map[docKey][]*item) {
	perKey = map[docKey][]*item{}
	for _, it := range items {
		if it.skipped {
			continue
		}
		k := it.key()
		if _, ok := perKey[k]; !ok {
			order = append(order, k)
		}
		perKey[k] = append(perKey[k], it)
	}
	return order, perKey
}

// rounds splits what the engine must do into requests holding at most one
// item per id, in the bulk's order. Of a document's items only those from
// its last index, create or delete on are sent (the earlier ones cannot
// change the outcome); the others answer as applied.
func (p *Proxy) rounds(items []*item) [][]*item {
	if !p.on(OrderedBulk) {
		var all []*item
		for _, it := range items {
			if !it.skipped {
				all = append(all, it)
			}
		}
		if len(all) == 0 {
			return nil
		}
		return [][]*item{all}
	}
	order, perKey := byDocument(items)
	var rounds [][]*item
	for _, k := range order {
		its := perKey[k]
		// Items before the document's last index, create or delete are
		// superseded by it.
		for i := len(its) - 1; i > 0; i-- {
			if its[i].action != actUpdate {
				its = its[i:]
				break
			}
		}
		for r, it := range its {
			if r == len(rounds) {
				rounds = append(rounds, nil)
			}
			rounds[r] = append(rounds[r], it)
		}
	}
	// Keep each round in the bulk's order.
	for _, round := range rounds {
		sortByPosition(round)
	}
	return rounds
}

func sortByPosition(items []*item) {
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && items[j].n < items[j-1].n; j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
}

// engineBulk is the engine's bulk answer. ZincSearch stops at the first
// document it refuses, says why in Error, and lists the items up to that
// one, which it reports created.
type engineBulk struct {
	Error string                       `json:"error"`
	Items []map[string]json.RawMessage `json:"items"`
}

type engineItem struct {
	Status int             `json:"status"`
	Error  json.RawMessage `json:"error"`
}

// send has the engine do one round's items. With ItemErrors on, it fails
// the item the engine stopped at and sends the rest again. An engine that
// cannot be reached fails the whole request while nothing was applied
// (the client retries it), and the items left otherwise.
func (p *Proxy) send(ctx context.Context, round []*item, applied bool) *apiError {
	for len(round) > 0 {
		resp, apiErr := p.sendOnce(ctx, round)
		if apiErr != nil {
			if !applied {
				return apiErr
			}
			for _, it := range round {
				it.err = apiErr
			}
			return nil
		}
		applied = true
		n := min(len(resp.Items), len(round))
		for i := 0; i < n; i++ {
			it := round[i]
			for _, raw := range resp.Items[i] {
				it.engine = raw
				var ei engineItem
				_ = json.Unmarshal(raw, &ei)
				if ei.Status >= 300 {
					it.err = errorf(ei.Status, "exception", "the engine refused the item: %s", raw)
				}
			}
		}
		if !p.on(ItemErrors) {
			for _, it := range round[n:] {
				it.err = errorf(http.StatusInternalServerError, "exception", "the engine did not answer for this item")
			}
			return nil
		}
		if resp.Error != "" && n > 0 {
			failed := round[n-1]
			failed.err = errorf(http.StatusBadRequest, "mapper_parsing_exception", "failed to parse: %s", resp.Error)
			failed.engine = nil
			round = round[n:]
			continue
		}
		if resp.Error != "" || n < len(round) {
			reason := resp.Error
			if reason == "" {
				reason = "the engine did not answer for this item"
			}
			for _, it := range round[n:] {
				it.err = errorf(http.StatusInternalServerError, "exception", "%s", reason)
			}
		}
		return nil
	}
	return nil
}

func (p *Proxy) sendOnce(ctx context.Context, round []*item) (*engineBulk, *apiError) {
	var b bytes.Buffer
	for _, it := range round {
		action := it.action
		if action == actCreate {
			action = actIndex // the proxy judged it already
		}
		index, _ := json.Marshal(it.index)
		id, _ := json.Marshal(it.id)
		b.WriteString(`{"` + action + `":{"_index":`)
		b.Write(index)
		b.WriteString(`,"_id":`)
		b.Write(id)
		b.WriteString("}}\n")
		if it.source != nil {
			b.Write(it.source)
			b.WriteByte('\n')
		}
	}
	resp, err := p.engineRequest(ctx, http.MethodPost, "/es/_bulk", "", b.Bytes(), http.Header{"Content-Type": {"application/x-ndjson"}})
	if err != nil {
		return nil, unavailable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, unavailable(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, engineStatus(resp.StatusCode, data)
	}
	var eb engineBulk
	if err := json.Unmarshal(data, &eb); err != nil {
		return nil, errorf(http.StatusBadGateway, "exception", "the engine's bulk answer does not parse: %v", err)
	}
	return &eb, nil
}

// engineStatus maps an engine's error answer: 429 and 5xx keep their status
// (clients retry them), others become 502.
func engineStatus(status int, body []byte) *apiError {
	reason := strings.TrimSpace(string(body))
	if len(reason) > 500 {
		reason = reason[:500]
	}
	switch {
	case status == http.StatusTooManyRequests:
		return errorf(status, "rejected_execution_exception", "the search engine is overloaded: %s", reason)
	case status >= 500:
		return errorf(status, "exception", "the search engine failed: %s", reason)
	}
	return errorf(http.StatusBadGateway, "exception", "the search engine answered %d: %s", status, reason)
}

// record numbers the items the engine applied and records each document's
// state after them; a document whose item failed keeps the state it had
// before that item, and items after it in the bulk fail with it.
func (p *Proxy) record(items []*item) error {
	if !p.on(ExternalVersions) {
		return nil
	}
	order, perKey := byDocument(items)
	var recs []record
	for _, k := range order {
		its := perKey[k]
		// The first item that failed at the engine undoes the items of
		// this document that were answered through a later one: fail
		// those too, and those after it.
		failedAt := -1
		for i, it := range its {
			if it.err != nil {
				failedAt = i
				break
			}
		}
		if failedAt >= 0 {
			cause, start := its[failedAt].err, failedAt
			if p.on(OrderedBulk) && its[failedAt].action != actUpdate {
				start = 0 // the items before it were answered through it
			}
			for _, it := range its[start:] {
				if it.err == nil {
					it.err = cause
				}
			}
			its = its[:start]
		}
		for _, it := range its {
			it.seqNo = p.state.nextSeq(k.index)
			it.after.SeqNo = it.seqNo
		}
		if len(its) > 0 {
			last := its[len(its)-1].after
			recs = append(recs, record{Op: "doc", Index: k.index, ID: k.id, Version: last.Version, SeqNo: last.SeqNo, Deleted: last.Deleted})
		}
	}
	return p.state.commit(recs...)
}

// hit is a search hit, as much of it as the proxy reads.
type hit struct {
	Index     string          `json:"_index"`
	ID        string          `json:"_id"`
	Timestamp string          `json:"@timestamp"`
	Score     json.RawMessage `json:"_score"`
	Source    json.RawMessage `json:"_source"`
}

// searchIDs finds documents by id through the engine's search (its own
// get-by-id cannot address an id holding '/').
func (p *Proxy) searchIDs(ctx context.Context, index string, ids []string, source bool) ([]hit, error) {
	q := map[string]any{"query": map[string]any{"ids": map[string]any{"values": ids}}, "size": len(ids)}
	if !source {
		q["_source"] = false
	}
	body, _ := json.Marshal(q)
	status, data, err := p.engineJSON(ctx, http.MethodPost, "/es/"+escapeSegments([]string{index})+"/_search", body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		if status == http.StatusBadRequest && engineMissing(data) {
			return nil, errIndexMissing
		}
		return nil, fmt.Errorf("search by id: %d %s", status, data)
	}
	var res struct {
		Hits struct {
			Hits []hit `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("search by id: %w", err)
	}
	return res.Hits.Hits, nil
}

var errIndexMissing = errors.New("no such index")
