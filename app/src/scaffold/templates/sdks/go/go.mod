module tickbox.dev/tick

go 1.24
