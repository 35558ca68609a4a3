// Package objectsapi is the wire contract of the objects HTTP API: the
// routes, headers and status codes below, and the JSON bodies (the types of
// this package) that the server (objectslambda) writes and the Go client
// (objectsclient) reads. It imports nothing of the server or the domain, so
// a client links only the contract.
//
// # Routes
//
// One greedy route, ANY /objects/{key+}, carries the key: the whole path
// after /objects/, percent-decoded by API Gateway, is the key, whatever it
// holds (any UTF-8 S3 takes, but NUL: objects.ValidateKey). Sub-resources
// are query parameters, as S3's are, so no key is ever mistaken for one;
// each route takes its own parameters, and any other is 400 bad-query.
// Clients write the key with EscapeKey (KeyPath), which keeps every byte
// of it from being rewritten on the way.
//
//	GET    /objects?prefix=P[&delimiter=D][&limit=N][&cursor=C]   list objects by prefix
//	PUT    /objects/{key}[?placement=table]    store a document (the raw body)
//	GET    /objects/{key}[?version=N]          read the latest version, or version N
//	DELETE /objects/{key}                      delete the object and its history
//	GET    /objects/{key}?versions             list versions, newest first
//	POST   /objects/{key}?uploads              grant a presigned upload (big documents)
//	GET    /objects/{key}?uploadId=ID          an upload's outcome
//	POST   /objects/{key}?uploadId=ID          finish a multipart upload
//
// PUT takes the body as it is (base64 bodies are decoded) with its
// Content-Type (default application/octet-stream). If-Match: <n> (or "n")
// writes only if version n is the latest; If-None-Match: * only if the
// object does not exist. ?placement=table keeps the document in DynamoDB
// (chunked if need be) instead of S3. The answer is 201 for version 1 (or
// with If-None-Match: *), else 200, with ETag: "<version>" and
//
//	{"key":"docs/a.txt","version":3,"size":12,"sha256":"…","contentType":"text/plain",
//	 "kind":"inline","codec":"identity","modified":"2026-11-21T10:00:00Z"}
//
// Bodies over the limit (default 4 MiB: Lambda takes 6 MB of event, and
// API Gateway base64-encodes binary bodies, a third more) get 413 too-large:
// use an upload.
//
// # Retries: a PUT is idempotent
//
// A PUT whose body has the latest version's SHA-256, size and
// Content-Type writes nothing: no payload, no version. It answers 200 with
// that version (ETag, and the JSON above with "unchanged":true) and the
// header X-Object-Unchanged: true. So a PUT whose answer was lost (a
// timeout, a dropped connection) may be sent again exactly as it was, and
// it never makes a second version:
//
//   - no precondition: 200 unchanged, the latest version;
//   - If-Match: n, with the latest at n (nothing to change) or at n+1 (the
//     first attempt committed n+1, which is always written on n): 200
//     unchanged with that version; the latest at n+1 with other bytes, or
//     any other version, is 409 conflict as before;
//   - If-None-Match: * (create only), with a live object holding the same
//     document: 200 unchanged (a retried create), whatever its version;
//     other bytes are 409;
//   - a deleted object is never "the same": a PUT after a DELETE makes a
//     new version (If-Match on the deleted version stays 409, "deleted");
//   - with ?placement=table, a latest version in S3 is not the same: the
//     document is written again, into the table.
//
// The same bytes under another Content-Type are a new version. A write
// that loses a race to a write of the same document gets the same 200
// unchanged answer. Unchanged PUTs are counted (WritesUnchanged), not
// placed.
//
// GET answers with the document, its Content-Type, ETag, X-Object-Version,
// X-Object-Sha256 and X-Object-Kind. A document in S3 bigger than a Lambda
// response can carry (default 4 MiB) gets 303 See Other, Location: a
// presigned GET valid for minutes, and {"url","expiresAt","size","sha256",
// "version","contentType"}; `curl -L` follows it. Every GET and HEAD says
// Accept-Ranges: bytes.
//
// # Ranges
//
// GET honours one byte range (RFC 9110, section 14): Range: bytes=a-b
// (bytes a to b, counted from 0, both included), bytes=a- (from a to the
// end) or bytes=-n (the last n bytes). The answer is 206 Partial Content
// with Content-Range: bytes <first>-<last>/<size>, the range's bytes, and
// the headers of a whole GET (ETag, X-Object-Version, X-Object-Size and
// X-Object-Sha256 describe the whole document). A last byte past the end
// stops at the end; a suffix longer than the document is all of it, still
// a 206. A range longer than a response carries (4 MiB) is cut to its
// first 4 MiB: Content-Range says which bytes came, ask for the rest next.
//
// What a range reads, and how it is verified:
//
//   - chunked documents (?placement=table) stored as they are read only the
//     chunks that hold the range (their keys come from the manifest's chunk
//     size and count), each verified against its own SHA-256, kept in the
//     manifest: a 1 KiB range reads one chunk, or two across a boundary.
//     Documents chunked without per-chunk digests, and gzip'd chunks, are
//     read and verified whole, then cut;
//   - inline and compressed documents are read, decompressed and verified
//     whole (a gzip stream cannot be entered in the middle), then cut;
//   - documents in S3 up to 4 MiB likewise; bigger ones answer 303 exactly
//     as without a Range (an unsatisfiable range is 416 first): send the
//     same Range header to the Location, and S3 answers 206 itself. Its
//     bytes cannot be checked against X-Object-Sha256 (nor can any range's):
//     the client checks they are the bytes it asked for.
//
// Refusals, each with the JSON error body:
//
//   - 416 range-not-satisfiable, with Content-Range: bytes */<size>: the
//     range starts at or past the end, or is bytes=-0;
//   - 416 multiple-ranges: several ranges in one header, overlapping or
//     not. One range is served per request. S3 answers such a request with
//     the whole object (200), silently; RFC 9110 lets a server reject a
//     range set it will not serve (section 15.5.17), and saying so costs the
//     client one round trip where the whole object would cost it every byte
//     (and, for a chunked document, every chunk read);
//   - 400 bad-range: not bytes=a-b, bytes=a- or bytes=-n in digits (no
//     "=", words, signs, a bare "-"), or b before a. RFC 9110 lets a
//     server ignore or reject an invalid range; S3 ignores it. A 400 names
//     the mistake instead of sending the whole document.
//
// What is not a refusal: a Range of another unit (items=0-9) is ignored,
// as RFC 9110 requires, and the whole document comes with 200; an empty
// document has no byte a range can name and also comes whole, 200 (as Go's
// net/http serves one); HEAD ignores Range. If-Range is honoured: with
// the current ETag ("n") the range is served, with another ETag or a date
// the whole document comes, 200. The other conditional headers (If-Match,
// If-None-Match, If-Modified-Since, If-Unmodified-Since) are not evaluated
// on GET, with or without a Range: a reader that assembles a document from
// several ranges pins it with ?version=N (or checks that every ETag is the
// same).
//
// POST …?uploads takes {"size":N,"sha256":"<hex>","contentType":"…",
// "ifMatch":n} (ifMatch optional; 0 means create only) and answers 201 with
// the upload's id, its status URL, and either "put" (one presigned PUT: send
// the body with exactly the headers given) or "multipart" (partSize, one
// presigned PUT per part in order, and the complete URL, to which the client
// POSTs {"parts":[{"partNumber":1,"etag":"…"},…]} with the ETags S3 returned).
// When the object lands in the bucket, the finalizer verifies its size and
// SHA-256 and commits it (honouring ifMatch); GET …?uploadId=ID then says
// {"state":"committed","version":n} or {"state":"failed","reason":…}.
// Uploads follow the retry rules of PUT: an upload of the document the
// latest version already holds is granted even with the ifMatch of its
// first attempt, commits nothing (the uploaded bytes are deleted) and says
// {"state":"committed","version":n,"unchanged":true}. POST …?uploadId=ID
// again, after the first one went through, answers with the upload as it
// is: 200 and its outcome once committed, 202 pending while the finalizer
// works; a failed or expired upload is 409 upload-closed.
//
// Documents in S3 are shared by content: the same bytes (SHA-256 and size)
// are stored once, whichever keys and versions hold them. A PUT of bytes
// already stored uploads nothing; an upload of them is still sent, and the
// uploaded copy is deleted once verified, the version referencing the
// stored one. A shared blob is deleted only after the last version naming
// it is removed (deleted, or pruned beyond the kept history), by the
// reaper, or by the hourly sweeper when the reaper missed it; a write of
// the same bytes meanwhile never references deleted bytes (it stores them
// again). Nothing of this shows in the answers but the version's reference.
//
// GET /objects lists the latest version of each live object whose key
// starts with prefix (empty: every object), in byte order of the keys, as
// S3's ListObjectsV2 does:
//
//	{"prefix":"docs/","objects":[{"key":"docs/a.txt","version":3,"size":12,"sha256":"…",
//	 "contentType":"text/plain","modified":"2026-11-21T10:00:00Z"},…],"cursor":"…"}
//
// With a delimiter (one character, usually /), keys that hold it after the
// prefix are rolled up into "commonPrefixes" (each once: "docs/2026/"), and
// only the keys directly under the prefix are in "objects". limit bounds
// the objects and common prefixes of one page together: 1 to 1,000, default
// 1,000. "cursor" is present when there is more: pass it back, with the
// same prefix and delimiter, for the next page. The listing reads an index
// that DynamoDB updates within moments of a write: a document written just
// now may not be listed yet. The prefix is any start of a key, the
// delimiter any one character but NUL. Refusals: 400 bad-prefix (NUL, not
// UTF-8, over 1,024 bytes), bad-delimiter, bad-limit, bad-cursor
// (malformed, or made for another prefix or delimiter), bad-query (another
// parameter).
//
// Errors are {"error":"<reason>","message":"…"} (apigw.ErrorBody, the
// edge every route shares: package shared/platform/apigw): 400 for bad keys
// (empty-key, key-too-long, key-not-utf8, key-bad-char: NUL), bad-query,
// bad-version, bad-if-match,
// bad-placement, invalid-json, missing-body, bad-sha256, bad-parts,
// bad-range; 404 not-found; 405 method-not-allowed; 409 conflict (with
// "currentVersion") and upload-closed; 413 too-large; 415
// bad-content-type; 416 range-not-satisfiable and multiple-ranges; 503
// throttled (retry); 500 internal (details are logged, never returned).
// Messages speak of JSON fields and types, never Go types, and are not
// HTML-escaped. The poll routes answer errors in the same shape. API
// Gateway's own answers (403 signature, 401 token, 404 no route, 413 over
// Lambda's payload limit, 5xx when the function fails) are
// {"message":"…"} with no "error", on AWS as locally.
//
// # With curl
//
// Every route is signed with SigV4 (service execute-api); curl 7.75 or
// later signs with --aws-sigv4 (docs/producers.md, "Calling the HTTP API";
// the presigned upload flow end to end: docs/objects.md).
//
//	. .ddbpipe/local.env        # API_URL, AWS_REGION and the local key
//	sig=(--aws-sigv4 "aws:amz:$AWS_REGION:execute-api" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY")
//	curl "${sig[@]}" -i -X PUT --data-binary @report.pdf -H 'Content-Type: application/pdf' $API_URL/objects/docs/report.pdf
//	curl "${sig[@]}" -i -X PUT --data-binary @report.pdf -H 'If-Match: 1' $API_URL/objects/docs/report.pdf
//	# the same again (its answer was lost): 200, X-Object-Unchanged: true, still version 2
//	curl "${sig[@]}" -i -X PUT --data-binary @report.pdf -H 'If-Match: 1' $API_URL/objects/docs/report.pdf
//	curl "${sig[@]}" -L -o copy.pdf $API_URL/objects/docs/report.pdf
//	curl "${sig[@]}" "$API_URL/objects/docs/report.pdf?version=1" -o v1.pdf
//	curl "${sig[@]}" -H 'Range: bytes=0-1023' $API_URL/objects/docs/report.pdf -o head.bin   # 206, the first KiB
//	curl "${sig[@]}" -L -H 'Range: bytes=-100' $API_URL/objects/data/big.bin -o tail.bin     # via S3 when it is big
//	curl "${sig[@]}" "$API_URL/objects/docs/report.pdf?versions="
//	curl "${sig[@]}" -X DELETE -H 'If-Match: 2' $API_URL/objects/docs/report.pdf
//	curl "${sig[@]}" -X POST -H 'Content-Type: application/json' \
//	  -d "{\"size\":$(stat -c%s big.bin),\"sha256\":\"$(sha256sum big.bin | cut -d' ' -f1)\"}" \
//	  "$API_URL/objects/data/big.bin?uploads="
//	# then PUT the file to .put.url with .put.headers (presigned: unsigned), and poll .status
package objectsapi
