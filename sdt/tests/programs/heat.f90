! A Fortran program for `--break` by Fortran names: a module procedure (gfortran's
! symbol __solver_MOD_relax) and an external one (report_), each called three times.
module solver
  implicit none
contains
  subroutine relax(u, n, sweeps)
    integer, intent(in) :: n, sweeps
    real(8), intent(inout) :: u(n)
    integer :: i, s
    do s = 1, sweeps
      do i = 2, n - 1
        u(i) = 0.5d0 * (u(i - 1) + u(i + 1))
      end do
    end do
  end subroutine relax
end module solver

subroutine report(step, total)
  integer, intent(in) :: step
  real(8), intent(in) :: total
  print '(a,i0,a,f10.4)', 'step ', step, ' total ', total
end subroutine report

program heat
  use solver
  implicit none
  real(8) :: u(100)
  integer :: step
  u = 0
  u(100) = 1
  do step = 1, 3
    call relax(u, 100, 50 * step)
    call report(step, sum(u))
  end do
end program heat
