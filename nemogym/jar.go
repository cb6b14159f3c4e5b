package nemogym

import (
	"net/http"
	"net/http/cookiejar"
)

// newJar returns one rollout's cookie jar: the model server keys endpoint affinity on
// its session cookie, so every call of a rollout sends back what earlier calls set.
func newJar() http.CookieJar {
	j, _ := cookiejar.New(nil) // never fails without options
	return j
}
