module tickbox.example/counter

go 1.24
