! A job written in Fortran with `use mpi_f08`: non-blocking exchanges from any source
! completed by Waitall, Wait and Test, a probe, blocking and non-blocking collectives,
! MPI_STATUS_IGNORE and MPI_IN_PLACE. Rank 0 prints what it received, the same in every
! run whatever the order of arrival.
program fortran08_job
  use mpi_f08
  implicit none
  integer :: rank, size, i, inbox(2), token, count
  type(MPI_Status) :: status
  type(MPI_Request) :: requests(2)
  logical :: done

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)

  token = rank
  do i = 1, 3
    call MPI_Irecv(inbox(1), 1, MPI_INTEGER, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, requests(1))
    call MPI_Isend(token, 1, MPI_INTEGER, mod(rank + 1, size), 3, MPI_COMM_WORLD, requests(2))
    call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE)
    token = token + inbox(1)
  end do

  call MPI_Irecv(inbox(1), 1, MPI_INTEGER, mod(rank + size - 1, size), 4, MPI_COMM_WORLD, requests(1))
  call MPI_Isend(rank, 1, MPI_INTEGER, mod(rank + 1, size), 4, MPI_COMM_WORLD, requests(2))
  call MPI_Wait(requests(2), MPI_STATUS_IGNORE)
  call MPI_Wait(requests(1), status)
  if (status%MPI_SOURCE /= mod(rank + size - 1, size)) stop 'wrong source'

  if (rank == 1) then
    call MPI_Send(token, 1, MPI_INTEGER, 0, 5, MPI_COMM_WORLD)
  else if (rank == 0) then
    call MPI_Probe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, status)
    call MPI_Get_count(status, MPI_INTEGER, count)
    call MPI_Irecv(inbox(2), count, MPI_INTEGER, status%MPI_SOURCE, 5, MPI_COMM_WORLD, requests(1))
    done = .false.
    do while (.not. done)
      call MPI_Test(requests(1), done, MPI_STATUS_IGNORE)
    end do
    print '(a,i0)', 'probed from 1 ', inbox(2)
  end if

  call MPI_Allreduce(MPI_IN_PLACE, token, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Ibarrier(MPI_COMM_WORLD, requests(1))
  call MPI_Wait(requests(1), MPI_STATUS_IGNORE)
  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) print '(a,i0)', 'token ', token
  call MPI_Finalize()
end program fortran08_job
