module tickbox.example/counter

go 1.24

require tickbox.dev/tick v0.0.0

// The SDK is a local module: sdks/go in tickbox's repository (a `tickbox new
// --lang go` project carries a copy in ./tick, and replaces to that).
replace tickbox.dev/tick => ../../sdks/go
