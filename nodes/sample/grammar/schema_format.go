package grammar

// formatPatterns are ECMA-262 patterns for the string formats the schema
// compiler enforces; each admits only strings that the format's RFC
// accepts (a subset: no leap seconds or February 29th, hostnames of at
// most four labels, absolute URIs with a host, ...).
var formatPatterns = map[string]string{
	"date":      `^` + datePattern + `$`,
	"time":      `^` + timePattern + `$`,
	"date-time": `^` + datePattern + `T` + timePattern + `$`,
	"email":     `^[A-Za-z0-9_+-]{1,20}(\.[A-Za-z0-9_+-]{1,20}){0,2}@` + emailDomainPattern + `$`,
	"hostname":  `^` + hostnamePattern + `$`,
	"ipv4":      `^` + ipv4Pattern + `$`,
	"ipv6":      `^(` + hex16 + `(:` + hex16 + `){7}|::|::(` + hex16 + `:){0,6}` + hex16 + `|(` + hex16 + `:){1,7}:)$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	"uri":       `^` + absoluteURIPattern + `$`,
	"iri":       `^` + absoluteURIPattern + `$`,
	// Relative references: a path.
	"uri-reference": `^(/?[A-Za-z0-9._~-]+)*$`,
	"iri-reference": `^(/?[A-Za-z0-9._~-]+)*$`,
	"json-pointer":  `^(/[A-Za-z0-9._-]*)*$`,
	"semver":        `^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$`,
	"duration":      `^P([1-9][0-9]{0,3}[YMWD]|T[1-9][0-9]{0,3}[HMS])$`,
	// Regexes every dialect reads alike: words (with any-character dots)
	// in alternation, anchored or not.
	"regex": `^\^?[A-Za-z0-9 ._-]*(\|[A-Za-z0-9 ._-]*)*\$?$`,
}

const (
	datePattern     = `[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))`
	timePattern     = `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`
	hostLabel       = `[A-Za-z0-9]([A-Za-z0-9-]{0,60}[A-Za-z0-9])?`
	hostnamePattern = hostLabel + `(\.` + hostLabel + `){0,3}`
	// An address is at most 254 octets (RFC 5321): 62 before the '@' and
	// labels of at most 30 after it.
	emailDomainLabel   = `[A-Za-z0-9]([A-Za-z0-9-]{0,28}[A-Za-z0-9])?`
	emailDomainPattern = emailDomainLabel + `(\.` + emailDomainLabel + `){0,3}`
	ipv4Octet          = `(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	ipv4Pattern        = ipv4Octet + `(\.` + ipv4Octet + `){3}`
	hex16              = `[0-9a-fA-F]{1,4}`
	// An absolute URI with an authority: a scheme (RFC 3986 3.1), a
	// hostname and port, a path and a query.
	absoluteURIPattern = `[A-Za-z][A-Za-z0-9+.-]{0,15}://` + hostnamePattern + `(:[0-9]{1,4})?(/[A-Za-z0-9._~-]*)*(\?[A-Za-z0-9._~=&-]*)?`
)

// assertedFormats are formats that validators check (and the compiler
// must therefore enforce or refuse) beyond formatPatterns.
var assertedFormats = map[string]bool{
	"relative-json-pointer": true, "period": true, "uri-template": true, "idn-email": true, "idn-hostname": true,
}
