! A job written in Fortran with `use mpi` (the mpif.h bindings): point-to-point calls
! of every kind the history records, with MPI_STATUS_IGNORE, MPI_ANY_SOURCE and
! MPI_IN_PLACE, and collectives, blocking and not. Rank 0 prints what it received, the
! same in every run whatever the order of arrival.
program fortran_job
  use mpi
  implicit none
  integer :: rank, size, ierr, i, peer, total, got, count, flag_count, outcount
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 8)
  integer :: requests(8), indices(8), values(8), persistent(2)
  integer :: box(4), sums(4), everyone(16)
  logical :: flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)

  ! Blocking sends round a ring, received without a status.
  total = rank
  do i = 1, 3
    if (rank == 0) then
      call MPI_Send(total, 1, MPI_INTEGER, mod(rank + 1, size), 1, MPI_COMM_WORLD, ierr)
      call MPI_Recv(total, 1, MPI_INTEGER, size - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    else
      call MPI_Recv(total, 1, MPI_INTEGER, rank - 1, 1, MPI_COMM_WORLD, status, ierr)
      total = total + rank
      call MPI_Ssend(total, 1, MPI_INTEGER, mod(rank + 1, size), 1, MPI_COMM_WORLD, ierr)
    end if
  end do
  if (rank == 0) print '(a,i0)', 'ring total ', total

  ! Every other rank sends to rank 0, which takes them from any source with Waitany.
  if (rank == 0) then
    do i = 1, size - 1
      call MPI_Irecv(values(i), 1, MPI_INTEGER, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, requests(i), ierr)
    end do
    got = 0
    do i = 1, size - 1
      call MPI_Waitany(size - 1, requests, peer, status, ierr)
      got = got + values(peer) * 0 + status(MPI_SOURCE)
    end do
    print '(a,i0)', 'sources summed ', got
  else
    call MPI_Isend(rank * 10, 1, MPI_INTEGER, 0, 2, MPI_COMM_WORLD, requests(1), ierr)
    call MPI_Wait(requests(1), MPI_STATUS_IGNORE, ierr)
  end if

  ! Non-blocking exchange with both neighbours, completed by Waitall with statuses.
  call MPI_Irecv(box(1), 1, MPI_INTEGER, mod(rank + size - 1, size), 3, MPI_COMM_WORLD, requests(1), ierr)
  call MPI_Irecv(box(2), 1, MPI_INTEGER, mod(rank + 1, size), 3, MPI_COMM_WORLD, requests(2), ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, mod(rank + 1, size), 3, MPI_COMM_WORLD, requests(3), ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, mod(rank + size - 1, size), 3, MPI_COMM_WORLD, requests(4), ierr)
  call MPI_Waitall(4, requests, statuses, ierr)
  if (statuses(MPI_SOURCE, 1) /= box(1) .or. statuses(MPI_SOURCE, 2) /= box(2)) stop 'wrong statuses'
  if (rank == 0) print '(a,i0,1x,i0)', 'neighbours ', box(1), box(2)

  ! Sendrecv with the neighbour on the right.
  call MPI_Sendrecv(rank, 1, MPI_INTEGER, mod(rank + 1, size), 4, got, 1, MPI_INTEGER, &
                    mod(rank + size - 1, size), 4, MPI_COMM_WORLD, status, ierr)
  if (got /= mod(rank + size - 1, size)) stop 'wrong sendrecv'

  ! Rank 1 sends a message of a size rank 0 learns by probing, then one it polls for.
  if (rank == 1) then
    everyone(1:5) = 7
    call MPI_Send(everyone, 5, MPI_INTEGER, 0, 5, MPI_COMM_WORLD, ierr)
    call MPI_Send(everyone, 2, MPI_INTEGER, 0, 6, MPI_COMM_WORLD, ierr)
  else if (rank == 0) then
    call MPI_Probe(1, 5, MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, count, ierr)
    call MPI_Recv(everyone, count, MPI_INTEGER, 1, 5, MPI_COMM_WORLD, status, ierr)
    flag = .false.
    flag_count = 0
    do while (.not. flag)
      call MPI_Iprobe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, flag, status, ierr)
      flag_count = flag_count + 1
    end do
    call MPI_Recv(everyone, 2, MPI_INTEGER, status(MPI_SOURCE), 6, MPI_COMM_WORLD, status, ierr)
    print '(a,i0)', 'probed count ', count
  end if

  ! Persistent requests round the ring, twice, and Waitsome until both are done.
  call MPI_Send_init(box(3), 1, MPI_INTEGER, mod(rank + 1, size), 7, MPI_COMM_WORLD, persistent(1), ierr)
  call MPI_Recv_init(box(4), 1, MPI_INTEGER, mod(rank + size - 1, size), 7, MPI_COMM_WORLD, persistent(2), ierr)
  do i = 1, 2
    box(3) = rank + i
    call MPI_Startall(2, persistent, ierr)
    count = 0
    do while (count < 2)
      call MPI_Waitsome(2, persistent, outcount, indices, MPI_STATUSES_IGNORE, ierr)
      count = count + outcount
    end do
  end do
  call MPI_Request_free(persistent(1), ierr)
  call MPI_Request_free(persistent(2), ierr)

  ! Collectives.
  got = 0
  if (rank == 0) got = 42
  call MPI_Bcast(got, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  sums = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Reduce(rank, total, 1, MPI_INTEGER, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
  call MPI_Gather(rank, 1, MPI_INTEGER, everyone, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_Allgather(rank, 1, MPI_INTEGER, everyone, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Alltoall(everyone, 1, MPI_INTEGER, box, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Iallreduce(rank, values(1), 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, requests(1), ierr)
  call MPI_Ibarrier(MPI_COMM_WORLD, requests(2), ierr)
  call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,1x,i0,1x,i0,1x,i0)', 'collectives ', got, sums(1), total, values(1)

  call MPI_Finalize(ierr)
end program fortran_job
