module tickbox.example/counter

go 1.24

require tickbox.dev/tick v0.0.0

// The SDK is this repository's sdks/go (a `tickbox new --lang go` project
// carries its own copy in ./tick).
replace tickbox.dev/tick => ../../sdks/go
