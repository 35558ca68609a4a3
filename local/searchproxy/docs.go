package searchproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// getDoc serves GET and HEAD /{index}/_doc/{id}, in real time as OpenSearch
// does: a document the proxy knows is written but the engine does not yet
// serve is waited for, one the proxy knows is deleted is not found.
func (p *Proxy) getDoc(w http.ResponseWriter, r *http.Request, name, id string) *apiError {
	index, apiErr := p.writeIndex(name)
	if apiErr != nil {
		return apiErr
	}
	k := docKey{index, id}
	unlock := p.state.lock([]docKey{k})
	st, known := p.state.doc(k)
	p.awaitServed(r.Context(), []docKey{k}, 4*p.o.RefreshInterval+time.Second)
	unlock()
	var found *hit
	hits, err := p.searchIDs(r.Context(), index, []string{id}, true)
	if errors.Is(err, errIndexMissing) {
		e := indexNotFound(name)
		return e
	}
	if err != nil {
		return unavailable(err)
	}
	if len(hits) > 0 {
		found = &hits[0]
	}
	if known && st.Deleted {
		found = nil
	}
	status := http.StatusOK
	resp := map[string]any{"_index": index, "_id": id, "found": found != nil}
	if found == nil {
		status = http.StatusNotFound
	} else {
		resp["_version"], resp["_seq_no"], resp["_primary_term"] = int64(1), int64(0), 1
		if known {
			resp["_version"], resp["_seq_no"] = st.Version, st.SeqNo
		}
		resp["_source"] = found.Source
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return nil
	}
	writeJSON(w, status, resp)
	return nil
}

// writeDoc serves the single-document writes as one-item bulks:
// PUT|POST /{index}/_doc/{id}, PUT|POST /{index}/_create/{id},
// POST /{index}/_doc and DELETE /{index}/_doc/{id}, with their version,
// version_type, if_seq_no, if_primary_term, op_type and refresh parameters.
func (p *Proxy) writeDoc(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	q := r.URL.Query()
	action := actIndex
	switch {
	case r.Method == http.MethodDelete:
		action = actDelete
	case seg[1] == "_create" || q.Get("op_type") == "create":
		action = actCreate
	}
	meta := map[string]any{"_index": seg[0]}
	if len(seg) == 3 {
		meta["_id"] = seg[2]
	}
	for _, name := range []string{"version", "if_seq_no", "if_primary_term"} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errorf(http.StatusBadRequest, "illegal_argument_exception", "failed to parse [%s] value [%s]", name, v)
			}
			meta[name] = n
		}
	}
	if v := q.Get("version_type"); v != "" {
		meta["version_type"] = v
	}
	line, _ := json.Marshal(map[string]any{action: meta})
	it, apiErr := parseAction(line, 1, "")
	if apiErr != nil {
		return apiErr
	}
	if action != actDelete {
		body, apiErr := p.readBody(r)
		if apiErr != nil {
			return apiErr
		}
		it.source = bytes.TrimSpace(body)
		if !isJSONObject(it.source) {
			return errorf(http.StatusBadRequest, "mapper_parsing_exception", "failed to parse: the document is not a JSON object")
		}
	}
	if apiErr := p.apply(r.Context(), []*item{it}, refreshParam(q)); apiErr != nil {
		return apiErr
	}
	if it.err != nil {
		return it.err
	}
	status := http.StatusOK
	resp := it.response()
	if r, ok := resp.(itemResponse); ok {
		status, r.Status = r.Status, 0
		resp = r
	}
	writeJSON(w, status, resp)
	return nil
}

// search forwards a search to the engine's, by the alias's index, and
// gives each hit the sort values a search_after needs (the engine gives
// none), its _version when asked ("version": true), and serves search_after
// by paging (searchafter.go).
func (p *Proxy) search(w http.ResponseWriter, r *http.Request, name string) *apiError {
	index := p.resolveList(name)
	path := "/es/" + escapeSegments([]string{index}) + "/_search"
	if strings.HasPrefix(name, "_") { // _all
		path = "/es/_search"
	}
	body, apiErr := p.readBody(r)
	if apiErr != nil {
		return apiErr
	}
	req := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return errorf(http.StatusBadRequest, "parsing_exception", "the search body does not parse: %v", err)
		}
	}
	keys := parseSort(req["sort"])
	var version bool
	_ = json.Unmarshal(req["version"], &version)
	if !p.on(SearchAfter) || len(keys) == 0 && !version {
		return p.forwardBody(w, r, path, body)
	}
	trim := withSourceFields(req, keys)
	var after []any
	from := 0
	if raw, ok := req["search_after"]; ok {
		if err := decodeJSON(raw, &after); err != nil || len(after) != len(keys) {
			return errorf(http.StatusBadRequest, "illegal_argument_exception", "search_after has %d value(s) where sort has %d", len(after), len(keys))
		}
		delete(req, "search_after")
		var apiErr *apiError
		if from, apiErr = p.searchAfterOffset(r.Context(), path, req, keys, after); apiErr != nil {
			return apiErr
		}
		req["from"], _ = json.Marshal(from)
	}
	sb, _ := json.Marshal(req)
	status, data, err := p.engineJSON(r.Context(), http.MethodPost, path, sb)
	if err != nil {
		return unavailable(err)
	}
	if status == http.StatusTooManyRequests || status >= 500 {
		return engineStatus(status, data)
	}
	if status != http.StatusOK {
		if engineMissing(data) {
			e := indexNotFound(name)
			return e
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
		return nil
	}
	var out map[string]any
	if err := decodeJSON(data, &out); err != nil {
		return errorf(http.StatusBadGateway, "exception", "the engine's search answer does not parse: %v", err)
	}
	hits, _ := out["hits"].(map[string]any)
	list, _ := hits["hits"].([]any)
	if last := p.decorateHits(list, keys, trim, version); last != nil {
		p.pages.put(pageKey(path, req, normalize(last)), from+len(list))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decorateHits gives each hit of a search answer its sort values (and
// trims the source fields only they asked for) and, when version, its
// _version. It returns the last hit's sort values, nil without sort keys.
func (p *Proxy) decorateHits(list []any, keys []sortKey, trim func(map[string]any), version bool) (last []any) {
	for _, h := range list {
		hm, ok := h.(map[string]any)
		if !ok {
			continue
		}
		if len(keys) > 0 {
			last = sortValues(hm, keys)
			hm["sort"] = last
			trim(hm)
		}
		if version {
			idx, _ := hm["_index"].(string)
			id, _ := hm["_id"].(string)
			hm["_version"] = int64(1)
			if st, ok := p.state.doc(docKey{idx, id}); ok {
				hm["_version"] = st.Version
			}
		}
	}
	return last
}

// count serves /{index}/_count from a search's total.
func (p *Proxy) count(w http.ResponseWriter, r *http.Request, name string) *apiError {
	body, apiErr := p.readBody(r)
	if apiErr != nil {
		return apiErr
	}
	var req struct {
		Query json.RawMessage `json:"query"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return errorf(http.StatusBadRequest, "parsing_exception", "the count body does not parse: %v", err)
		}
	}
	q := map[string]any{"size": 0, "track_total_hits": true}
	if req.Query != nil {
		q["query"] = req.Query
	}
	if s := r.URL.Query().Get("q"); s != "" {
		q["query"] = map[string]any{"query_string": map[string]any{"query": s}}
	}
	sb, _ := json.Marshal(q)
	index := p.resolveList(name)
	status, data, err := p.engineJSON(r.Context(), http.MethodPost, "/es/"+escapeSegments([]string{index})+"/_search", sb)
	if err != nil {
		return unavailable(err)
	}
	if status != http.StatusOK {
		if engineMissing(data) {
			e := indexNotFound(name)
			return e
		}
		return engineStatus(status, data)
	}
	var res struct {
		Hits struct {
			Total struct {
				Value int64 `json:"value"`
			} `json:"total"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return errorf(http.StatusBadGateway, "exception", "the engine's search answer does not parse: %v", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": res.Hits.Total.Value, "_shards": map[string]int{"total": 1, "successful": 1, "skipped": 0, "failed": 0}})
	return nil
}

// indexAPI serves PUT, DELETE, HEAD and GET /{index}.
func (p *Proxy) indexAPI(w http.ResponseWriter, r *http.Request, name string) *apiError {
	switch r.Method {
	case http.MethodPut:
		return p.createIndex(w, r, name)
	case http.MethodDelete:
		return p.deleteIndex(w, r, name)
	case http.MethodHead:
		return p.forward(w, r, "/es/"+escapeSegments([]string{p.resolveList(name)}), "")
	case http.MethodGet:
		return p.getIndex(w, r, name)
	}
	return errorf(http.StatusMethodNotAllowed, "illegal_argument_exception", "method %s is not allowed on /%s", r.Method, name)
}

// validIndexName applies OpenSearch's rules for index (and alias) names.
func validIndexName(name string) *apiError {
	bad := func(why string) *apiError {
		e := errorf(http.StatusBadRequest, "invalid_index_name_exception", "Invalid index name [%s], %s", name, why)
		e.Index = name
		return e
	}
	switch {
	case name != strings.ToLower(name):
		return bad("must be lowercase")
	case strings.ContainsAny(name, `\/*?"<>| ,#:`):
		return bad(`must not contain the following characters [ , ", *, \, <, |, ,, >, /, ?, #, :]`)
	case strings.HasPrefix(name, "_") || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "+"):
		return bad("must not start with '_', '-', or '+'")
	case name == "." || name == "..":
		return bad("must not be '.' or '..'")
	case len(name) > 255:
		return bad("index name is too long")
	}
	return nil
}

func (p *Proxy) createIndex(w http.ResponseWriter, r *http.Request, name string) *apiError {
	if e := validIndexName(name); e != nil {
		return e
	}
	if p.on(Aliases) && p.state.isAlias(name) {
		e := errorf(http.StatusBadRequest, "invalid_index_name_exception", "Invalid index name [%s], already exists as alias", name)
		e.Index = name
		return e
	}
	body, apiErr := p.readBody(r)
	if apiErr != nil {
		return apiErr
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	status, data, err := p.engineJSON(r.Context(), http.MethodPut, "/es/"+escapeSegments([]string{name}), body)
	if err != nil {
		return unavailable(err)
	}
	if status == http.StatusBadRequest && bytes.Contains(data, []byte("already exists")) {
		e := errorf(http.StatusBadRequest, "resource_already_exists_exception", "index [%s/%s] already exists", name, indexUUID(name))
		e.Index = name
		return e
	}
	if status != http.StatusOK {
		return errorf(http.StatusBadRequest, "illegal_argument_exception", "the search engine refused the index: %s", strings.TrimSpace(string(data)))
	}
	if fields := strictFieldsOf(body); fields != nil && p.on(StrictMapping) {
		if err := p.state.commit(record{Op: "strict", Index: name, Fields: fields}); err != nil {
			return errorf(http.StatusInternalServerError, "exception", "%v", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"acknowledged": true, "shards_acknowledged": true, "index": name})
	return nil
}

func (p *Proxy) deleteIndex(w http.ResponseWriter, r *http.Request, name string) *apiError {
	if p.on(Aliases) && p.state.isAlias(name) {
		return errorf(http.StatusBadRequest, "illegal_argument_exception",
			"The provided expression [%s] matches an alias, specify the corresponding concrete indices instead.", name)
	}
	status, data, err := p.engineJSON(r.Context(), http.MethodDelete, "/api/index/"+escapeSegments([]string{name}), nil)
	if err != nil {
		return unavailable(err)
	}
	if status != http.StatusOK {
		e := indexNotFound(name)
		if !engineMissing(data) {
			e = engineStatus(status, data)
		}
		return e
	}
	if err := p.state.commit(record{Op: "drop", Index: name}); err != nil {
		return errorf(http.StatusInternalServerError, "exception", "%v", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"acknowledged": true})
	return nil
}

// getIndex answers GET /{index}: its aliases, mappings and settings.
func (p *Proxy) getIndex(w http.ResponseWriter, r *http.Request, name string) *apiError {
	index, apiErr := p.writeIndex(name)
	if apiErr != nil {
		return apiErr
	}
	out := map[string]any{"aliases": p.aliasesOf(index)}
	for _, part := range []string{"mappings", "settings"} {
		path := "/es/" + escapeSegments([]string{index}) + "/_mapping"
		if part == "settings" {
			path = "/es/" + escapeSegments([]string{index}) + "/_settings"
		}
		status, data, err := p.engineJSON(r.Context(), http.MethodGet, path, nil)
		if err != nil {
			return unavailable(err)
		}
		if status != http.StatusOK {
			e := indexNotFound(name)
			return e
		}
		var m map[string]map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return errorf(http.StatusBadGateway, "exception", "the engine's %s do not parse: %v", part, err)
		}
		out[part] = m[index][part]
	}
	writeJSON(w, http.StatusOK, map[string]any{index: out})
	return nil
}

func (p *Proxy) aliasesOf(index string) map[string]any {
	out := map[string]any{}
	for a, indexes := range p.state.aliasMap() {
		if contains(indexes, index) {
			out[a] = map[string]any{}
		}
	}
	return out
}

// aliasAction is one action of POST /_aliases.
type aliasAction struct {
	Index   string   `json:"index"`
	Indices []string `json:"indices"`
	Alias   string   `json:"alias"`
	Aliases []string `json:"aliases"`
}

// aliasesAPI serves POST /_aliases and GET|HEAD /_alias[/{name}].
func (p *Proxy) aliasesAPI(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	if seg[0] == "_aliases" && len(seg) == 1 && r.Method == http.MethodPost {
		body, apiErr := p.readBody(r)
		if apiErr != nil {
			return apiErr
		}
		var req struct {
			Actions []map[string]aliasAction `json:"actions"`
		}
		if err := json.Unmarshal(body, &req); err != nil || len(req.Actions) == 0 {
			return invalid("no action specified")
		}
		return p.updateAliases(w, r.Context(), req.Actions)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return errorf(http.StatusMethodNotAllowed, "illegal_argument_exception", "method %s is not allowed here", r.Method)
	}
	var names []string
	if len(seg) > 1 {
		names = strings.Split(seg[1], ",")
	}
	return p.writeAliases(w, r, "", names)
}

// indexAliases serves /{index}/_alias[/{name}]: GET, HEAD, PUT, POST and DELETE.
func (p *Proxy) indexAliases(w http.ResponseWriter, r *http.Request, seg []string) *apiError {
	var name string
	if len(seg) > 2 {
		name = seg[2]
	}
	switch r.Method {
	case http.MethodPut, http.MethodPost, http.MethodDelete:
		if name == "" {
			return invalid("alias is missing")
		}
		verb := "add"
		if r.Method == http.MethodDelete {
			verb = "remove"
		}
		return p.updateAliases(w, r.Context(), []map[string]aliasAction{{verb: {Index: seg[0], Alias: name}}})
	}
	var names []string
	if name != "" {
		names = strings.Split(name, ",")
	}
	return p.writeAliases(w, r, p.resolveList(seg[0]), names)
}

// writeAliases answers {index: {"aliases": {alias: {}}}} for the aliases
// named (all when none), of the indexes in index (a list; any when "").
func (p *Proxy) writeAliases(w http.ResponseWriter, r *http.Request, index string, names []string) *apiError {
	all := p.state.aliasMap()
	var only []string
	if index != "" {
		only = strings.Split(index, ",")
	}
	out := map[string]any{}
	var missing []string
	for _, n := range names {
		if _, ok := all[n]; !ok {
			missing = append(missing, n)
		}
	}
	for a, indexes := range all {
		if len(names) > 0 && !contains(names, a) {
			continue
		}
		for _, i := range indexes {
			if only != nil && !contains(only, i) {
				continue
			}
			entry, _ := out[i].(map[string]any)
			if entry == nil {
				entry = map[string]any{"aliases": map[string]any{}}
				out[i] = entry
			}
			entry["aliases"].(map[string]any)[a] = map[string]any{}
		}
	}
	if len(names) == 0 {
		for _, i := range only {
			if out[i] == nil {
				out[i] = map[string]any{"aliases": map[string]any{}}
			}
		}
	}
	status := http.StatusOK
	if len(missing) > 0 {
		status = http.StatusNotFound
		out["error"] = "alias [" + strings.Join(missing, ",") + "] missing"
		out["status"] = status
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return nil
	}
	writeJSON(w, status, out)
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// updateAliases applies alias actions all or none, in order.
func (p *Proxy) updateAliases(w http.ResponseWriter, ctx context.Context, actions []map[string]aliasAction) *apiError {
	p.aliasMu.Lock()
	defer p.aliasMu.Unlock()
	cur := p.state.aliasMap()
	next := map[string]map[string]bool{}
	for a, indexes := range cur {
		next[a] = map[string]bool{}
		for _, i := range indexes {
			next[a][i] = true
		}
	}
	exists := map[string]bool{}
	indexExists := func(index string) (bool, error) {
		if ok, seen := exists[index]; seen {
			return ok, nil
		}
		resp, err := p.engineRequest(ctx, http.MethodHead, "/es/"+escapeSegments([]string{index}), "", nil, nil)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		exists[index] = resp.StatusCode == http.StatusOK
		return exists[index], nil
	}
	for _, action := range actions {
		for verb, a := range action {
			if verb != "add" && verb != "remove" {
				return errorf(http.StatusBadRequest, "illegal_argument_exception", "alias action [%s] is not supported by the local search proxy", verb)
			}
			for _, index := range append(a.Indices, a.Index) {
				if index == "" {
					continue
				}
				for _, alias := range append(a.Aliases, a.Alias) {
					if alias == "" {
						continue
					}
					if verb == "remove" {
						if !next[alias][index] {
							return errorf(http.StatusNotFound, "aliases_not_found_exception", "aliases [%s] missing", alias)
						}
						delete(next[alias], index)
						continue
					}
					if apiErr := p.checkAliasAdd(index, alias, indexExists); apiErr != nil {
						return apiErr
					}
					if next[alias] == nil {
						next[alias] = map[string]bool{}
					}
					next[alias][index] = true
				}
			}
		}
	}
	var recs []record
	for a, indexes := range cur {
		for _, i := range indexes {
			if !next[a][i] {
				recs = append(recs, record{Op: "unalias", Alias: a, Index: i})
			}
		}
	}
	for a, indexes := range next {
		for i := range indexes {
			if !contains(cur[a], i) {
				recs = append(recs, record{Op: "alias", Alias: a, Index: i})
			}
		}
	}
	if err := p.state.commit(recs...); err != nil {
		return errorf(http.StatusInternalServerError, "exception", "%v", err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"acknowledged": true})
	return nil
}

// checkAliasAdd refuses an alias on a missing index, or named as an index.
func (p *Proxy) checkAliasAdd(index, alias string, indexExists func(string) (bool, error)) *apiError {
	ok, err := indexExists(index)
	if err != nil {
		return unavailable(err)
	}
	if !ok {
		e := indexNotFound(index)
		return e
	}
	if e := validIndexName(alias); e != nil {
		e.Type = "invalid_alias_name_exception"
		return e
	}
	isIndex, err := indexExists(alias)
	if err != nil {
		return unavailable(err)
	}
	if isIndex {
		return errorf(http.StatusBadRequest, "invalid_alias_name_exception",
			"Invalid alias name [%s]: an index or data stream exists with the same name as the alias", alias)
	}
	return nil
}

// indexNotFound is OpenSearch's answer about a missing index.
func indexNotFound(name string) *apiError {
	e := errorf(http.StatusNotFound, "index_not_found_exception", "no such index [%s]", name)
	e.Index = name
	return e
}

// engineMissing reports whether an engine's error body says the index is
// missing (ZincSearch answers 400 "index … does not exists").
func engineMissing(body []byte) bool { return bytes.Contains(body, []byte("does not exist")) }
